-- sem_add.lua: add (or with a negative delta, remove) permits (Redisson addPermits: a plain SET,
-- which clears any TTL, and the total may go below 0). Redisson publishes the new total even
-- when it is <= 0; rlock publishes only when permits became available, at most the delta.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- ARGV[1]  delta (any non-zero integer)
-- Returns the new number of available permits (may be negative).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local value = tonumber(redis.call('get', KEYS[1]) or '0')
local delta = tonumber(ARGV[1])
local total = value + delta
redis.call('set', KEYS[1], total)
if delta > 0 and total > 0 then
    redis.pcall('publish', KEYS[2], math.min(total, delta))
end
return total
