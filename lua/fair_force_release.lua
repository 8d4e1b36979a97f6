#!lua flags=allow-oom
-- fair_force_release.lua: delete a fair lock whoever holds it and notify the first live waiter
-- (dropping dead heads first, as every fair script does).
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  message to publish ("0" = unlock)
-- Returns 1 if the lock existed and was deleted, 0 if it was not locked.
--         {r, err}  the same r, but a PUBLISH was refused (err: Redis' NOPERM text); publishing
--                   goes through redis.pcall (inc/notify.lua), so the deletion stands
redis.replicate_commands()
--@include inc/notify.lua
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local first = redis.call('lindex', KEYS[2], 0)
local head = first
while head do
    local s = redis.call('zscore', KEYS[3], head)
    if s and tonumber(s) > now then
        break
    end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
    head = redis.call('lindex', KEYS[2], 0)
end
local result = redis.call('del', KEYS[1])
if head and (result == 1 or head ~= first) then
    local err = notify(KEYS[4] .. ':' .. head, ARGV[1])
    if err then
        return {result, err}
    end
end
return result
