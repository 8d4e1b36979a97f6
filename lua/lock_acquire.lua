#!lua
-- lock_acquire.lua: take or re-enter a reentrant lock (Redisson RLock data) and issue a fencing
-- token when the lock is taken from free. A busy caller that is going to wait records itself
-- (rlock only) in the waiters zset with a liveness deadline on the server's clock, so that a
-- release wakes one waiting rlock thread instead of every waiting rlock client.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name} (never reset, no TTL)
-- KEYS[3]  the waiters zset, rlock_lock_waiters:{name} (member = owner field -> deadline, ms);
--          may be absent (RedLock's callers), and then nobody is recorded
-- KEYS[4]  the waiting flag, rlock_lock_wake:{name} as a key (a string "1" that lives as long
--          as the zset): a release deletes it with the lock hash, and DEL's count tells it that
--          rlock waiters may be recorded without one more command; may be absent (then a
--          release wakes this waiter through Redisson's "0")
-- ARGV[1]  lease in ms (PEXPIRE of the hash; on re-entry only if longer than its PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  liveness timeout in ms of a waiter; 0 or absent = do not record this caller
-- ARGV[4]  "1" when the caller is a recorded waiter (an attempt after it began to wait), which a
--          grant takes out of the zset; absent or "0" for a first attempt, which costs nothing more
--          than Redisson's script when the lock is free
-- Returns {1, token}  acquired from free; token is the new counter value
--         {1, 0}      re-entered by the same owner; the owner keeps its token
--         {0, pttl}   held by another owner; pttl is its remaining lease (-1: no expiry),
--                     capped at the liveness timeout for a recorded waiter, whose wake-up may
--                     have gone to a waiter that died
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if KEYS[3] and ARGV[4] == '1' then
        redis.call('zrem', KEYS[3], ARGV[2])
    end
    return {1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the hold (Redisson's PEXPIRE does): it extends only to a longer
    -- lease, and a key without expiry keeps none.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, 0}
end
local ttl = redis.call('pttl', KEYS[1])
local timeout = tonumber(ARGV[3] or '0')
if KEYS[3] and timeout > 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[3], now + timeout, ARGV[2])
    -- The zset disappears by itself once no waiter refreshes it, and the flag with it.
    local keep = math.max(redis.call('pttl', KEYS[3]), timeout)
    redis.call('pexpire', KEYS[3], keep)
    if KEYS[4] then
        redis.call('set', KEYS[4], '1', 'px', keep)
    end
    if ttl < 0 or ttl > timeout then
        ttl = timeout
    end
end
return {0, ttl}
