-- inc/rw_wake_writer.lua: spliced by cmake/rlock_embed_lua.cmake into the read-write scripts
-- that name it on an include line (Redis scripts cannot call each other), after
-- inc/live_waiter.lua, whose live_waiter() it calls.
-- rw_wake_writer(zset, prefix): wakes ONE waiting writer, the live one (deadline still ahead on
-- the server's clock) with the earliest deadline, with "0" on its own channel prefix .. ':' ..
-- member. Only one writer can take the lock, so waking every waiting writer cost each release N
-- messages and N - 1 failed attempts (the write side granted ~260/s under 64 waiters). A writer
-- that was woken and gives up instead passes the wake-up on (rw_writer_leave.lua); a woken writer
-- that loses the lock to another writer is woken again by that writer's release.
-- Publishes through redis.pcall (see inc/notify.lua); returns nil, or Redis' error text when the
-- PUBLISH was refused.
local function rw_wake_writer(zset, prefix)
    local w = live_waiter(zset)
    if w then
        local r = redis.pcall('publish', prefix .. ':' .. w, 0)
        if type(r) == 'table' and r.err then
            return r.err
        end
    end
    return nil
end
