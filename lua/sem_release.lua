-- sem_release.lua: return n plain permits to a semaphore (Redisson RSemaphore.release data) and
-- wake at most n waiters per process. Redisson publishes the new total; rlock publishes
-- min(total, n), a value Redisson's own subscribers read the same way (a bound on wake-ups), so
-- a release of one permit never wakes a herd. Nothing is published when no permit is available.
-- The request key (rlock's own, in the name's slot) makes a resend of the same call a no-op: the
-- first run stores its reply there for a short time, and a resend whose first copy ran (its
-- reply lost) returns that reply without releasing again.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- KEYS[3]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  n, the permits released (>= 1)
-- ARGV[2]  how long the request key is kept, ms
-- Returns the new number of available permits (for a resend: the number the first run returned).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local n = tonumber(ARGV[1])
local total = redis.call('incrby', KEYS[1], n)
if total > 0 then
    redis.pcall('publish', KEYS[2], math.min(total, n))
end
redis.call('set', KEYS[3], total, 'px', ARGV[2])
return total
