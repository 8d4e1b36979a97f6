#!lua flags=allow-oom
-- lock_release.lua: release one hold of a reentrant lock (Redisson RLock data); the last release
-- deletes the hash and publishes the unlock message so one waiter per process wakes up.
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_lock__channel:{name}
-- ARGV[1]  lease in ms to keep when holds remain (only if longer than the PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  message to publish on full release ("0" = wake one waiter)
-- Returns -1  the owner holds nothing (not the owner, or the lease ran out); nothing changed
--          0  one hold released, the owner still holds the lock
--          1  fully released and published
--         {r, err}  the same r, but the PUBLISH was refused (err: Redis' NOPERM text): the release
--                   happened, waiters wake only when their wait bound (the lease) runs out
-- Publishing goes through redis.pcall (inc/notify.lua): a user without the publish permission
-- still releases instead of failing after the DEL, and the client logs the refusal once.
--@include inc/notify.lua
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return -1
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count > 0 then
    -- Like a re-entry, a partial release never shortens the hold that remains.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('del', KEYS[1])
local err = notify(KEYS[2], ARGV[3])
if err then
    return {1, err}
end
return 1
