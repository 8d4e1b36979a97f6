#!lua
-- lock_acquire.lua: take or re-enter a reentrant lock (Redisson RLock data) and issue a fencing
-- token when the lock is taken from free. A busy caller that is going to wait records itself
-- (rlock only) in the waiters zset with a liveness deadline on the server's clock, so that a
-- release wakes one waiting rlock thread instead of every waiting rlock client.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name} (never reset, no TTL)
-- KEYS[3]  the waiters zset, rlock_lock_waiters:{name} (member = owner field -> deadline, ms);
--          may be absent (RedLock's callers), and then nobody is recorded
-- KEYS[4]  the waiting flag, rlock_lock_wake:{name} as a key (a string "1" that lives as long
--          as the zset): a release deletes it with the lock hash, and DEL's count tells it that
--          rlock waiters may be recorded without one more command; may be absent (then a
--          release wakes this waiter through Redisson's "0")
-- KEYS[5]  the grant hash, rlock_lock_waiters:{name}:grants (rlock only: owner field -> "<ttl>:<wait>", the
--          TTL in ms a release that grants the lock to this waiter gives it and the id of the
--          lock call that waits, see lock_release.lua; lives as long as the zset); may be absent
--          (no grant is registered then)
-- ARGV[1]  lease in ms (PEXPIRE of the hash; on re-entry only if longer than its PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  liveness timeout in ms of a waiter; 0 or absent = do not record this caller
-- ARGV[4]  "1" when the caller is a recorded waiter (an attempt after it began to wait), which a
--          grant takes out of the zset; absent or "0" for a first attempt, which costs nothing more
--          than Redisson's script when the lock is free. Such a caller whose own field is in
--          the hash was granted the lock by a release (a waiting thread cannot hold it): the
--          grant is taken as it stands (PEXPIRE to ARGV[1]), with no second hold and no new token
-- ARGV[5]  the TTL in ms of a grant to this caller if it waits (registered in KEYS[5]); 0 or
--          absent = this waiter takes no grant (a release only wakes it)
-- ARGV[6]  the id of the caller's lock call (a number unique in its process), with ARGV[5]
-- Returns {1, token}  acquired from free; token is the new counter value; or granted to this
--                     recorded waiter by a release: token is the counter's value (GET)
--         {1, 0}      re-entered by the same owner; the owner keeps its token
--         {0, pttl}   held by another owner; pttl is its remaining lease (-1: no expiry),
--                     capped at the liveness timeout for a recorded waiter, whose wake-up may
--                     have gone to a waiter that died
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if KEYS[3] and ARGV[4] == '1' then
        redis.call('zrem', KEYS[3], ARGV[2])
        if KEYS[5] then
            redis.call('hdel', KEYS[5], ARGV[2])
        end
    end
    return {1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[4] == '1' then
        -- Granted by a release while this thread waited (its message was not seen): the grant
        -- already counted the hold and issued the token, and gave only the grant TTL.
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the hold (Redisson's PEXPIRE does): it extends only to a longer
    -- lease, and a key without expiry keeps none.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, 0}
end
local ttl = redis.call('pttl', KEYS[1])
local timeout = tonumber(ARGV[3] or '0')
if KEYS[3] and timeout > 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[3], now + timeout, ARGV[2])
    -- The zset disappears by itself once no waiter refreshes it, and the flag with it.
    local keep = math.max(redis.call('pttl', KEYS[3]), timeout)
    redis.call('pexpire', KEYS[3], keep)
    if KEYS[4] then
        redis.call('set', KEYS[4], '1', 'px', keep)
    end
    local grant = tonumber(ARGV[5] or '0')
    if KEYS[5] and grant > 0 then
        redis.call('hset', KEYS[5], ARGV[2], grant .. ':' .. ARGV[6])
        redis.call('pexpire', KEYS[5], keep)
    end
    if ttl < 0 or ttl > timeout then
        ttl = timeout
    end
end
return {0, ttl}
