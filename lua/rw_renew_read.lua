#!lua flags=allow-oom
-- rw_renew_read.lua: the watchdog's batch renewal of read holds. For each (lock, owner) pair it
-- renews every timeout key of that owner's read holds, {name}:<owner>:rwlock_timeout:1..count,
-- and keeps the hash alive at least as long. Only the owners passed in are touched, so a client
-- never renews another client's dead readers (Redisson #7098).
-- KEYS[1..N]   lock hashes (lock names)
-- ARGV[1]      lease in ms
-- ARGV[2..N+1] read owner field "<uuid>:<tid>" for each key, in order
-- Returns an array of N integers: 1 renewed, 0 the owner no longer holds a read hold there.
local lease = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS do
    local name = KEYS[i]
    local owner = ARGV[i + 1]
    local holds = tonumber(redis.call('hget', name, owner) or '0')
    result[i] = 0
    if holds ~= nil and holds > 0 then
        -- Redisson's suffixName: "{name}" unless the name carries its own hash tag.
        local prefix = '{' .. name .. '}'
        if string.find(name, '{', 1, true) then
            prefix = name
        end
        for n = 1, holds do
            redis.call('pexpire', prefix .. ':' .. owner .. ':rwlock_timeout:' .. n, lease)
        end
        redis.call('pexpire', name, math.max(redis.call('pttl', name), lease))
        result[i] = 1
    end
end
return result
