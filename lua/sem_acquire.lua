-- sem_acquire.lua: take permits of a semaphore (Redisson RSemaphore / RPermitExpirableSemaphore
-- data). Leased permits whose expiry has passed are first returned to the pool (as Redisson's
-- permit-expirable acquire does), then n permits are taken if that many are available. With
-- permit ids the permits are leased: each id is recorded in the timeout zset with its expiry.
-- Every attempt of one acquire call carries the same request key (rlock's own, in the name's
-- slot): a taken acquire marks it "1" for a short time, so that an attempt resent after its reply
-- was lost answers "acquired" instead of taking the permits twice; sem_acquire_cancel.lua marks it
-- "0" (cancelled), after which no copy of the call's attempts takes anything.
-- KEYS[1]  the permits counter (the semaphore name; a decimal string, may be negative)
-- KEYS[2]  the leased permits zset {name}:timeout (member = 16-byte id, score = expiry, epoch ms)
-- KEYS[3]  the channel redisson_sc:{name}
-- KEYS[4]  the request key {name}:rlock_request:<32 hex digits> (one per acquire call)
-- ARGV[1]  n, the permits wanted (>= 1)
-- ARGV[2]  now, the caller's clock in epoch ms (decides which leases have expired)
-- ARGV[3]  expiry score for the ids (epoch ms, or 922337203685477 = no expiry); unused without ids
-- ARGV[4]  how long the request key is kept, ms
-- ARGV[5..] permit ids (raw bytes), exactly n of them for a leased acquire, none for plain permits
-- Returns {1, 0}     acquired (now, or by an earlier attempt of the same call)
--         {0, ms}    not acquired; ms = time until the earliest lease expires (a waiter wakes
--                    then, as nobody publishes when a lease runs out), or -1 if no lease can
--                    expire (also: the call was cancelled)
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[4])
if done == '1' then
    return {1, 0}
elseif done then
    return {0, -1}
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local total = redis.call('incrby', KEYS[1], #expired)
    if total > 0 then
        redis.pcall('publish', KEYS[3], math.min(total, #expired))
    end
end
local n = tonumber(ARGV[1])
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= n then
    redis.call('decrby', KEYS[1], n)
    if #ARGV > 4 then
        for i = 5, #ARGV do
            redis.call('zadd', KEYS[2], ARGV[3], ARGV[i])
        end
        local ttl = redis.call('pttl', KEYS[1])
        if ttl > 0 then
            redis.call('pexpire', KEYS[2], ttl)
        end
    end
    redis.call('set', KEYS[4], '1', 'px', ARGV[4])
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] ~= nil and first[2] ~= '922337203685477' then
    local ms = tonumber(first[2]) - tonumber(ARGV[2])
    return {0, ms > 0 and ms or 0}
end
return {0, -1}
