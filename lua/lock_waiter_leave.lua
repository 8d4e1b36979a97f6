#!lua flags=allow-oom
-- lock_waiter_leave.lua: a thread waiting for a reentrant lock gives up (timeout or error): it
-- leaves the waiters zset and, if it was there and the lock is free, passes the wake-up on to
-- another live waiter (named on its client's wake channel, as lock_release.lua names one),
-- since a release may have woken this thread alone. No "0" follows on Redisson's channel:
-- Redisson's waiters were sent the release's own.
-- KEYS[1]  the waiters zset, rlock_lock_waiters:{name}
-- KEYS[2]  the prefix of rlock's wake channels, rlock_lock_wake:{name} (":<uuid>" appended)
-- KEYS[3]  the lock hash (the lock name)
-- ARGV[1]  owner field "<client-uuid>:<thread-id>"
-- Returns 1 if the thread was waiting, 0 if not.
--@include inc/live_waiter.lua
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
    return 0
end
if redis.call('exists', KEYS[3]) == 0 then
    local w = live_waiter(KEYS[1])
    if w then
        redis.pcall('publish', KEYS[2] .. ':' .. string.match(w, '^(.*):'), w)
    end
end
return 1
