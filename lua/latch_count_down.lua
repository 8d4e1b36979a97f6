-- latch_count_down.lua: count a latch down by one (Redisson RCountDownLatch.countDown data): the
-- key is deleted when the count reaches 0 or below, and reaching exactly 0 publishes "0", which
-- opens the latch for every waiter. The request key (rlock's own, in the name's slot) makes a
-- resend of the same call a no-op: the first run stores its reply there for a short time, and a
-- resend whose first copy ran (its reply lost) returns that reply without counting down again.
-- KEYS[1]  the count (the latch name)
-- KEYS[2]  the channel redisson_countdownlatch__channel__{name}
-- KEYS[3]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  how long the request key is kept, ms
-- Returns the count after the decrement, 0 or more (a latch that was not counting gives 0).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.pcall('publish', KEYS[2], '0')
end
v = v > 0 and v or 0
redis.call('set', KEYS[3], v, 'px', ARGV[1])
return v
