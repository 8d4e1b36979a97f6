-- inc/notify.lua: spliced by cmake/rlock_embed_lua.cmake into the scripts that say
-- "--@include inc/notify.lua" (Redis scripts cannot call each other).
-- notify(channel, message): publishes through redis.pcall, so that a user without the publish
-- permission (or without access to the channel) still finishes the script that already changed
-- the lock: a release that happened must be reported as one. Returns nil when published, else
-- Redis' error text (NOPERM ...), which the caller hands back beside its result so that the
-- client can log once that waiters are not being notified.
local function notify(channel, message)
    local r = redis.pcall('publish', channel, message)
    if type(r) == 'table' and r.err then
        return r.err
    end
    return nil
end
