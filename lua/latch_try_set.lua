-- latch_try_set.lua: start a count-down latch if it is not counting (Redisson
-- RCountDownLatch.trySetCount data).
-- KEYS[1]  the count (the latch name; absent = 0)
-- KEYS[2]  the channel redisson_countdownlatch__channel__{name}
-- ARGV[1]  the count (>= 1)
-- Returns 1 set (and published "1", Redisson's "new count" message), 0 already counting.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[1])
    redis.pcall('publish', KEYS[2], '1')
    return 1
end
return 0
