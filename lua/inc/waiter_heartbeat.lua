-- inc/waiter_heartbeat.lua: spliced by cmake/rlock_embed_lua.cmake into the heartbeat scripts of
-- waiters recorded in a zset (rw_writer_heartbeat.lua, lock_waiter_heartbeat.lua).
-- waiter_heartbeat(prefix): the watchdog's batch refresh (KEYS[1..N] lock names, ARGV[1] liveness
-- timeout in ms, ARGV[2..N+1] each waiter's member, which is also its field in the lock hash) of
-- the deadlines in the zset prefix .. ':{' .. name .. '}'. A waiter missing from the zset (purged
-- after its process stalled) is put back, since it is demonstrably alive; a waiter that already
-- holds the lock is left out. flag_prefix (may be nil) names a string key flag_prefix .. ':{' ..
-- name .. '}' kept as long as the zset (the reentrant lock's waiting flag, see lock_release.lua).
-- grants (may be nil): the zset has a grant hash, its name .. ':grants' (waiter -> grant TTL and
-- wait, lock_acquire.lua), kept as long as the zset too; a granted waiter holds the lock and so is
-- never put back.
-- Returns an array of N integers, all 1 (a waiter is never "lost").
local function waiter_heartbeat(prefix, flag_prefix, grants)
    local timeout = tonumber(ARGV[1])
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local result = {}
    for i = 1, #KEYS do
        local name = KEYS[i]
        if redis.call('hexists', name, ARGV[i + 1]) == 0 then
            -- Redisson's prefixName: "prefix:{name}" unless the name carries its own hash tag.
            local tagged = '{' .. name .. '}'
            if string.find(name, '{', 1, true) then
                tagged = name
            end
            local zset = prefix .. ':' .. tagged
            redis.call('zadd', zset, now + timeout, ARGV[i + 1])
            local keep = math.max(redis.call('pttl', zset), timeout)
            redis.call('pexpire', zset, keep)
            if flag_prefix then
                redis.call('set', flag_prefix .. ':' .. tagged, '1', 'px', keep)
            end
            if grants then
                redis.call('pexpire', zset .. ':grants', keep)
            end
        end
        result[i] = 1
    end
    return result
end
