-- sem_available.lua: the available permits after returning expired leased permits to the pool
-- (Redisson RPermitExpirableSemaphore.availablePermits; for a semaphore without leases this is
-- GET). A semaphore that was never set has 0.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the leased permits zset {name}:timeout
-- KEYS[3]  the channel redisson_sc:{name}
-- ARGV[1]  now, the caller's clock in epoch ms
-- Returns the available permits (may be negative after a negative add).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local total = redis.call('incrby', KEYS[1], #expired)
    if total > 0 then
        redis.pcall('publish', KEYS[3], math.min(total, #expired))
    end
    return total
end
return tonumber(redis.call('get', KEYS[1]) or '0')
