-- latch_count_down.lua: count a latch down by one (Redisson RCountDownLatch.countDown data): the
-- key is deleted when the count reaches 0 or below, and reaching exactly 0 publishes "0", which
-- opens the latch for every waiter.
-- KEYS[1]  the count (the latch name)
-- KEYS[2]  the channel redisson_countdownlatch__channel__{name}
-- Returns the count after the decrement, 0 or more (a latch that was not counting gives 0).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.pcall('publish', KEYS[2], '0')
end
return v > 0 and v or 0
