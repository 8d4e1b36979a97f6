-- sem_update_lease.lua: give a leased permit a new expiry (Redisson
-- RPermitExpirableSemaphore.updateLeaseTime: expired leases go back to the pool first, then a
-- permit still in the zset gets the new score). Running it twice sets the same expiry, so a
-- resend after a lost reply needs no request key.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the leased permits zset {name}:timeout
-- KEYS[3]  the channel redisson_sc:{name}
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  the new expiry, the caller's clock in epoch ms
-- ARGV[3]  now, the caller's clock in epoch ms
-- Returns 1 updated, 0 no such permit (released, or its lease had run out).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local total = redis.call('incrby', KEYS[1], #expired)
    if total > 0 then
        redis.pcall('publish', KEYS[3], math.min(total, #expired))
    end
end
if redis.call('zscore', KEYS[2], ARGV[1]) then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    return 1
end
return 0
