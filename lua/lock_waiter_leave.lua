#!lua flags=allow-oom
-- lock_waiter_leave.lua: a thread waiting for a reentrant lock gives up (timeout or error): it
-- leaves the waiters zset and, if it was there and the lock is free, passes the wake-up on to
-- another live waiter (named on rlock's wake channel, followed by its twin unlock message on
-- Redisson's channel, as lock_release.lua sends them), since a release may have woken this
-- thread alone.
-- KEYS[1]  the waiters zset, rlock_lock_waiters:{name}
-- KEYS[2]  rlock's wake channel, rlock_lock_wake:{name}
-- KEYS[3]  the channel, redisson_lock__channel:{name}
-- KEYS[4]  the lock hash (the lock name)
-- ARGV[1]  owner field "<client-uuid>:<thread-id>"
-- Returns 1 if the thread was waiting, 0 if not.
--@include inc/live_waiter.lua
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
    return 0
end
if redis.call('exists', KEYS[4]) == 0 then
    local w = live_waiter(KEYS[1])
    if w then
        redis.pcall('publish', KEYS[2], w)
        redis.pcall('publish', KEYS[3], 0)
    end
end
return 1
