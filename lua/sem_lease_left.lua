-- sem_lease_left.lua: the remaining lease of a leased permit (Redisson
-- RPermitExpirableSemaphore.getLeaseTime: expired leases go back to the pool first).
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the leased permits zset {name}:timeout
-- KEYS[3]  the channel redisson_sc:{name}
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  now, the caller's clock in epoch ms
-- ARGV[3]  the score of a permit without expiry (922337203685477)
-- Returns the ms left (> 0), -1 for a permit without expiry, or -2 no such permit.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local total = redis.call('incrby', KEYS[1], #expired)
    if total > 0 then
        redis.pcall('publish', KEYS[3], math.min(total, #expired))
    end
end
local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
    return -2
end
if tonumber(score) == tonumber(ARGV[3]) then
    return -1
end
return tonumber(score) - tonumber(ARGV[2])
