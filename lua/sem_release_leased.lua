-- sem_release_leased.lua: return one leased permit (Redisson RPermitExpirableSemaphore.tryRelease
-- data: the id leaves the timeout zset and the counter grows by one). As in Redisson, a permit
-- whose lease ran out but that no script reclaimed yet is still returned, with reply 0. The
-- request key makes a resend of the same call return the first run's reply (see sem_release.lua).
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- KEYS[3]  the leased permits zset {name}:timeout (Redisson's key order)
-- KEYS[4]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  now, the caller's clock in epoch ms
-- ARGV[3]  how long the request key is kept, ms
-- Returns 1 released, 0 released but its lease had already run out, -1 no such permit.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[4])
if done then
    return tonumber(done)
end
local result = -1
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) == 1 then
    local total = redis.call('incrby', KEYS[1], 1)
    if total > 0 then
        redis.pcall('publish', KEYS[2], 1)
    end
    result = tonumber(expiry) <= tonumber(ARGV[2]) and 0 or 1
end
redis.call('set', KEYS[4], result, 'px', ARGV[3])
return result
