-- sem_release_leased.lua: return one leased permit (Redisson RPermitExpirableSemaphore.tryRelease
-- data: the id leaves the timeout zset and the counter grows by one). As in Redisson, a permit
-- whose lease ran out but that no script reclaimed yet is still returned, with reply 0.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- KEYS[3]  the leased permits zset {name}:timeout (Redisson's key order)
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  now, the caller's clock in epoch ms
-- Returns 1 released, 0 released but its lease had already run out, -1 no such permit.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
    return -1
end
local total = redis.call('incrby', KEYS[1], 1)
if total > 0 then
    redis.pcall('publish', KEYS[2], 1)
end
if tonumber(expiry) <= tonumber(ARGV[2]) then
    return 0
end
return 1
