-- sem_try_set.lua: set a semaphore's permits if it was never set (Redisson trySetPermits, and
-- with a TTL its trySetPermits(permits, timeToLive): SET with PX).
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- ARGV[1]  the permits (>= 0)
-- ARGV[2]  optional: the counter's time to live, ms (> 0)
-- Returns 1 set (and published the permits as the wake-up bound), 0 it was already set.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
if redis.call('get', KEYS[1]) == false then
    if ARGV[2] then
        redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
    else
        redis.call('set', KEYS[1], ARGV[1])
    end
    redis.pcall('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
