#!lua flags=allow-oom
-- lock_waiter_leave.lua: a thread waiting for a reentrant lock gives up (timeout or error): it
-- leaves the waiters zset and, if it was there and the lock is free, passes the wake-up on to
-- another live waiter (named on its client's wake channel, as lock_release.lua names one),
-- since a release may have woken this thread alone. No "0" follows on Redisson's channel:
-- Redisson's waiters were sent the release's own.
-- KEYS[1]  the waiters zset, rlock_lock_waiters:{name}
-- KEYS[2]  the prefix of rlock's wake channels, rlock_lock_wake:{name} (":<uuid>" appended)
-- KEYS[3]  the lock hash (the lock name)
-- KEYS[4]  the grant hash, rlock_lock_waiters:{name}:grants (its field of the thread goes); may be absent
-- KEYS[5]  the fencing counter, redisson_lock_token:{name}; may be absent with KEYS[4]
-- ARGV[1]  owner field "<client-uuid>:<thread-id>"
-- Returns 1 if the thread was waiting, 0 if not, {2, token} if a release granted it the lock
-- (lock_release.lua) before it left: it holds the lock, with the counter's value as its token.
--@include inc/live_waiter.lua
if KEYS[4] then
    redis.call('hdel', KEYS[4], ARGV[1])
end
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
    if KEYS[5] and redis.call('hexists', KEYS[3], ARGV[1]) == 1 then
        return {2, tonumber(redis.call('get', KEYS[5]) or '0')}
    end
    return 0
end
if redis.call('exists', KEYS[3]) == 0 then
    local w = live_waiter(KEYS[1])
    if w then
        redis.pcall('publish', KEYS[2] .. ':' .. string.match(w, '^(.*):'), w)
    end
end
return 1
