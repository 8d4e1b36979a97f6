-- latch_delete.lua: delete a latch (Redisson RCountDownLatch.delete: DEL, and when a count was
-- deleted, the new-count message "1" on the channel, as Redisson publishes).
-- The request key makes a resend of the same call a no-op that returns the first run's reply.
-- KEYS[1]  the count (the latch name)
-- KEYS[2]  the channel redisson_countdownlatch__channel__{name}
-- KEYS[3]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  how long the request key is kept, ms
-- Returns 1 deleted, 0 the latch was not counting (for a resend: the first run's reply).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local result = 0
if redis.call('del', KEYS[1]) == 1 then
    redis.pcall('publish', KEYS[2], '1')
    result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[1])
return result
