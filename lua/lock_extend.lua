#!lua flags=allow-oom
-- lock_extend.lua: rlock_extend() of one owner's hold of a hash-based lock (reentrant, spin,
-- fair, write, read): makes the lock's remaining lease at least ARGV[1] ms, and for a read hold
-- that of every timeout key of the owner's read holds too. Never shortens: a key whose PTTL is
-- longer already, or that has no expiry, is left alone. Grows no memory (allow-oom).
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in ms
-- ARGV[2]  the owner's hash field ("<uuid>:<n>", or "<uuid>:<n>:write" for a write hold)
-- ARGV[3]  read holds: the owner's timeout-key prefix "{name}:<uuid>:<n>:rwlock_timeout"
--          (":1" .. ":<count>" appended, Redisson's keys); "" for every other type
-- Returns 1 extended (or long enough already), 0 the owner holds nothing there.
local lease = tonumber(ARGV[1])
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if holds == nil or holds <= 0 then
    return 0
end
local function at_least(key)
    local left = redis.call('pttl', key)
    if left >= 0 and left < lease then
        redis.call('pexpire', key, lease)
    end
end
if ARGV[3] ~= '' then
    for n = 1, holds do
        at_least(ARGV[3] .. ':' .. n)
    end
end
at_least(KEYS[1])
return 1
