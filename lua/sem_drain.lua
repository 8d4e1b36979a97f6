-- sem_drain.lua: take every available permit (Redisson RSemaphore.drainPermits: a plain SET to 0,
-- which clears any TTL, and nothing published since no permit became free).
-- The request key (rlock's own, in the name's slot) makes a resend of the same call a no-op that
-- returns the first run's reply, so a drain whose reply was lost is not applied twice.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  how long the request key is kept, ms
-- Returns the count before the drain (0 for a never-set semaphore; negative after a negative add,
-- as Redisson's), or for a resend the number the first run returned.
local done = redis.call('get', KEYS[2])
if done then
    return tonumber(done)
end
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
else
    redis.call('set', KEYS[1], 0)
end
redis.call('set', KEYS[2], value, 'px', ARGV[1])
return tonumber(value)
