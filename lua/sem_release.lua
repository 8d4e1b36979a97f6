-- sem_release.lua: return n plain permits to a semaphore (Redisson RSemaphore.release data) and
-- wake at most n waiters per process. Redisson publishes the new total; rlock publishes
-- min(total, n), a value Redisson's own subscribers read the same way (a bound on wake-ups), so
-- a release of one permit never wakes a herd. Nothing is published when no permit is available.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- ARGV[1]  n, the permits released (>= 1)
-- Returns the new number of available permits.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local n = tonumber(ARGV[1])
local total = redis.call('incrby', KEYS[1], n)
if total > 0 then
    redis.pcall('publish', KEYS[2], math.min(total, n))
end
return total
