#!lua
-- rw_read_acquire.lua: take or re-enter the read side of a read-write lock (Redisson
-- RReadWriteLock data). Each read hold n gets its own key <prefix>:<n> carrying that hold's lease,
-- and the hash lives as long as its longest hold. With writer preference, a new reader (one that
-- holds neither a read hold nor the write side) stays out while a live writer is waiting, so a
-- stream of readers cannot starve writers; re-entry and the write holder's downgrade always pass.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  this owner's timeout-key prefix, {name}:<uuid>:<tid>:rwlock_timeout
-- KEYS[3]  the fencing counter, redisson_lock_token:{name}
-- KEYS[4]  the waiting-writers zset, rlock_rwlock_writers:{name} (member -> deadline, server ms)
-- ARGV[1]  lease in ms of this hold
-- ARGV[2]  read owner field "<uuid>:<tid>"
-- ARGV[3]  write owner field "<uuid>:<tid>:write"
-- ARGV[4]  1 = writer preference (honour waiting writers), 0 = Redisson's reader preference
-- Returns {1, token}  acquired; token is the counter's current value (0 if no writer ever held)
--         {0, ttl}    busy: ttl bounds the wait (the hash's PTTL, or when waiting writers block
--                     this reader, the time until the earliest of their deadlines; -1 unknown)
local function token()
    return tonumber(redis.call('get', KEYS[3]) or '0')
end
local function writers_block()
    if ARGV[4] ~= '1' then
        return nil
    end
    -- The earliest writer first: with none waiting (the common case) that is the one command.
    local first = redis.call('zrange', KEYS[4], 0, 0, 'withscores')
    if first[1] == nil then
        return nil
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if tonumber(first[2]) <= now then
        redis.call('zremrangebyscore', KEYS[4], '-inf', now)
        first = redis.call('zrange', KEYS[4], 0, 0, 'withscores')
        if first[1] == nil then
            return nil
        end
    end
    return math.max(1, tonumber(first[2]) - now)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    local wait = writers_block()
    if wait ~= nil then
        return {0, wait}
    end
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token()}
end
local downgrade = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if mode == 'read' or downgrade then
    if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        local wait = writers_block()
        if wait ~= nil then
            return {0, wait}
        end
    end
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    -- The hash lives as long as its longest hold: a re-entry never shortens it.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, token()}
end
return {0, redis.call('pttl', KEYS[1])}
