#!lua flags=allow-oom
-- rw_force_release.lua: delete a read-write lock whoever holds it, but only if it is held in the
-- given mode (forcing the read side leaves a write lock alone and vice versa), and wake waiters.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  the waiting-writers zset, rlock_rwlock_writers:{name}
-- KEYS[4]  prefix of waiting writers' channels, rlock_rwlock_writer:{name} (+ ":" + write field)
-- ARGV[1]  mode the lock must be in: "read" or "write"
-- ARGV[2]  message to publish: Redisson's "0" for the read side, "1" for the write side (each
--          waiting writer also gets "1" on its private channel)
-- Returns 1 if the lock was held in that mode and was deleted, 0 otherwise.
--         {r, err}  the same r, but a PUBLISH was refused (err: Redis' NOPERM text); publishing
--                   goes through redis.pcall (inc/notify.lua), so the deletion stands
--@include inc/notify.lua
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    local err = notify(KEYS[2], ARGV[2])
    for _, writer in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        err = notify(KEYS[4] .. ':' .. writer, 1) or err
    end
    if err then
        return {1, err}
    end
    return 1
end
return 0
