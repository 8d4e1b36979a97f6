-- sem_permits.lua: the total permits or the leased permits held (Redisson
-- RPermitExpirableSemaphore.getPermits and acquiredPermits: expired leases go back to the pool
-- first; the total is the available count plus the leased permits, 0 for a never-set semaphore).
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the leased permits zset {name}:timeout
-- KEYS[3]  the channel redisson_sc:{name}
-- ARGV[1]  now, the caller's clock in epoch ms
-- ARGV[2]  'total' or 'leased'
-- Returns the total (may be negative after a negative add) or the number of leased permits.
-- The leased permits are counted with ZRANGE where Redisson uses ZCOUNT (every score is >= 0, so
-- both count every member): ZCOUNT is not in docs/acl.md's minimal command set.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local total = redis.call('incrby', KEYS[1], #expired)
    if total > 0 then
        redis.pcall('publish', KEYS[3], math.min(total, #expired))
    end
end
local leased = #redis.call('zrange', KEYS[2], 0, -1)
if ARGV[2] == 'leased' then
    return leased
end
local available = redis.call('get', KEYS[1])
if available == false then
    return 0
end
return tonumber(available) + leased
