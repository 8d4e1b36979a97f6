#!lua flags=allow-oom
-- rw_read_release.lua: release one read hold (Redisson RReadWriteLock data). The hold's timeout
-- key goes, and the hash's TTL is recomputed from the remaining read holds' own timeout keys, so
-- readers whose process died (their keys expired) cannot keep the lock alive; when no live read
-- hold remains the hash is deleted and waiters are woken: "0" on Redisson's channel, and "0" on the
-- private channel of one waiting writer, the live one with the earliest deadline (writers have
-- their own channels so that a wake-up meant for them cannot be taken by a reader of the same
-- process that must keep waiting behind them; only one writer can get the lock).
-- While the owner also holds the write side the hash and its TTL belong to that write hold and are
-- left alone.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  this owner's timeout-key prefix, {name}:<uuid>:<tid>:rwlock_timeout
-- KEYS[4]  the key prefix of every owner's timeout keys, {name} (name itself if it has a '{')
-- KEYS[5]  the waiting-writers zset, rlock_rwlock_writers:{name}
-- KEYS[6]  prefix of waiting writers' channels, rlock_rwlock_writer:{name} (+ ":" + write field)
-- ARGV[1]  read owner field "<uuid>:<tid>"
-- Returns -1  the owner holds no read hold (not the owner, or the lease ran out); nothing changed
--          0  one hold released, the owner still holds the read side
--          1  the owner's last read hold released
--         {r, err}  the same r, but the PUBLISH was refused (err: Redis' NOPERM text): the release
--                   happened, waiters wake only when their wait bound (the lease) runs out
-- Publishing goes through redis.pcall (inc/notify.lua): a user without the publish permission
-- still releases instead of failing after the DEL, and the client logs the refusal once.
--@include inc/live_waiter.lua
--@include inc/rw_wake_writer.lua
--@include inc/notify.lua
-- HGET of this owner's count checks it and tells the last hold from others (no HEXISTS, and no
-- HINCRBY to 0 before an HDEL or DEL).
local mode = redis.call('hget', KEYS[1], 'mode')
local held = mode and redis.call('hget', KEYS[1], ARGV[1])
if not held then
    return -1
end
local count = tonumber(held) - 1
if count > 0 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
elseif mode == 'read' and redis.call('hlen', KEYS[1]) == 2 then
    -- The last hold of the only reader (the hash is its field and the mode): the hash and the
    -- hold's timeout key go in one DEL, as the steps below would end.
    redis.call('del', KEYS[3] .. ':1', KEYS[1])
    local err = notify(KEYS[2], 0)
    err = rw_wake_writer(KEYS[5], KEYS[6]) or err
    if err then
        return {1, err}
    end
    return 1
else
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
local result = 1
if count > 0 then
    result = 0
end
if mode == 'write' then
    return result
end
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    local fields = redis.call('hgetall', KEYS[1])
    for i = 1, #fields, 2 do
        local holds = tonumber(fields[i + 1])
        if holds ~= nil then
            for n = holds, 1, -1 do
                local ttl = redis.call('pttl', KEYS[4] .. ':' .. fields[i] .. ':rwlock_timeout:' .. n)
                longest = math.max(longest, ttl)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        return result
    end
end
redis.call('del', KEYS[1])
local err = notify(KEYS[2], 0)
err = rw_wake_writer(KEYS[5], KEYS[6]) or err
if err then
    return {result, err}
end
return result
