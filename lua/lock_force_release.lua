#!lua flags=allow-oom
-- lock_force_release.lua: delete a lock whoever holds it and wake the waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel to notify
-- ARGV[1]  message to publish ("0" wake one, "1" wake all)
-- Returns 1 if the lock existed and was deleted, 0 if it was not locked.
--         {r, err}  the same r, but a PUBLISH was refused (err: Redis' NOPERM text); publishing
--                   goes through redis.pcall (inc/notify.lua), so the deletion stands
--@include inc/notify.lua
if redis.call('del', KEYS[1]) == 1 then
    local err = notify(KEYS[2], ARGV[1])
    if err then
        return {1, err}
    end
    return 1
end
return 0
