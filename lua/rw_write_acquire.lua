#!lua
-- rw_write_acquire.lua: take or re-enter the write side of a read-write lock (Redisson
-- RReadWriteLock data) and issue a fencing token when the lock is taken from free. A caller that
-- holds only the read side is refused at once (an upgrade would wait for itself forever). A busy
-- caller that is allowed to queue records itself as a waiting writer with a liveness deadline on
-- the server's clock, which keeps new readers out until it gets the lock, gives up or stops
-- refreshing the deadline.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name} (never reset, no TTL)
-- KEYS[3]  the waiting-writers zset, rlock_rwlock_writers:{name} (member -> deadline, server ms)
-- ARGV[1]  lease in ms
-- ARGV[2]  write owner field "<uuid>:<tid>:write"
-- ARGV[3]  read owner field "<uuid>:<tid>"
-- ARGV[4]  liveness timeout in ms of a waiting writer; 0 = do not record this caller as waiting
-- Returns {1, token}  acquired from free; token is the new counter value
--         {1, 0}      re-entered by the write holder; it keeps its token
--         {0, ttl}    held by others; ttl is the hash's remaining lease (-1: no expiry), capped
--                     at the liveness timeout for a recorded waiter: it waits on its private
--                     channel, which a Redisson client's release does not reach
--         {-1, 0}     the caller holds the read side only: it can never get the write side
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('zrem', KEYS[3], ARGV[2])
    return {1, redis.call('incr', KEYS[2])}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A shorter lease on re-entry must not cut the holds already granted (Redisson #1110), and a
    -- key without expiry keeps none.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, 0}
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return {-1, 0}
end
if tonumber(ARGV[4]) > 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), ARGV[2])
    -- The zset disappears by itself once no writer refreshes it.
    local remain = redis.call('pttl', KEYS[3])
    redis.call('pexpire', KEYS[3], math.max(remain, tonumber(ARGV[4])))
    local ttl = redis.call('pttl', KEYS[1])
    if ttl < 0 or ttl > tonumber(ARGV[4]) then
        ttl = tonumber(ARGV[4])
    end
    return {0, ttl}
end
return {0, redis.call('pttl', KEYS[1])}
