-- sem_release_if_exists.lua: return n plain permits only to a semaphore whose counter exists
-- (Redisson RSemaphore.releaseIfExists); as sem_release.lua otherwise, publishing min(total, n)
-- where Redisson publishes the new total.
-- The request key makes a resend of the same call a no-op that returns the first run's reply.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- KEYS[3]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  n, the permits released (>= 1)
-- ARGV[2]  how long the request key is kept, ms
-- Returns 1 released, 0 the semaphore does not exist (for a resend: the first run's reply).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local result = 0
if redis.call('exists', KEYS[1]) == 1 then
    local n = tonumber(ARGV[1])
    local total = redis.call('incrby', KEYS[1], n)
    if total > 0 then
        redis.pcall('publish', KEYS[2], math.min(total, n))
    end
    result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[2])
return result
