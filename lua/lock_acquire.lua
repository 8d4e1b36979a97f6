#!lua
-- lock_acquire.lua: take or re-enter a reentrant lock (Redisson RLock data) and issue a fencing
-- token when the lock is taken from free.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the fencing counter, redisson_lock_token:{name} (never reset, no TTL)
-- ARGV[1]  lease in ms (PEXPIRE of the hash; on re-entry only if longer than its PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- Returns {1, token}  acquired from free; token is the new counter value
--         {1, 0}      re-entered by the same owner; the owner keeps its token
--         {0, pttl}   held by another owner; pttl is its remaining lease (-1: no expiry)
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- A re-entry never shortens the hold (Redisson's PEXPIRE does): it extends only to a longer
    -- lease, and a key without expiry keeps none.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {1, 0}
end
return {0, redis.call('pttl', KEYS[1])}
