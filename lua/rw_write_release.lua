#!lua flags=allow-oom
-- rw_write_release.lua: release one write hold (Redisson RReadWriteLock data). The last write
-- hold either frees the lock or, when the owner still holds read holds, turns the lock into a
-- read lock (downgrade) whose TTL is its read holds' longest remaining lease. Both cases publish
-- "1" so that every waiting reader in every process re-attempts (Redisson publishes nothing on a
-- downgrade, leaving readers asleep until their TTL bound), and "0" on the private channel of one
-- waiting writer (the live one with the earliest deadline): only one writer can get the lock.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  this owner's timeout-key prefix, {name}:<uuid>:<tid>:rwlock_timeout
-- KEYS[4]  the waiting-writers zset, rlock_rwlock_writers:{name}
-- KEYS[5]  prefix of waiting writers' channels, rlock_rwlock_writer:{name} (+ ":" + write field)
-- ARGV[1]  write owner field "<uuid>:<tid>:write"
-- ARGV[2]  read owner field "<uuid>:<tid>"
-- Returns -1  the owner holds no write hold; nothing changed
--          0  one hold released, the owner still holds the write side
--          1  the owner's last write hold released
--         {r, err}  the same r, but the PUBLISH was refused (err: Redis' NOPERM text): the release
--                   happened, waiters wake only when their wait bound (the lease) runs out
-- Publishing goes through redis.pcall (inc/notify.lua): a user without the publish permission
-- still releases instead of failing after the DEL, and the client logs the refusal once.
--@include inc/live_waiter.lua
--@include inc/rw_wake_writer.lua
--@include inc/notify.lua
-- HGET of this owner's write count checks it and tells the last hold from others (no HEXISTS,
-- and no HINCRBY to 0 before the HDEL or DEL).
local held = redis.call('hget', KEYS[1], 'mode') == 'write' and
    redis.call('hget', KEYS[1], ARGV[1])
if not held then
    return -1
end
if tonumber(held) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return 0
end
local reads = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
local longest = -3
for n = reads, 1, -1 do
    longest = math.max(longest, redis.call('pttl', KEYS[3] .. ':' .. n))
end
if longest > 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
else
    redis.call('del', KEYS[1])
end
local err = notify(KEYS[2], 1)
err = rw_wake_writer(KEYS[4], KEYS[5]) or err
if err then
    return {1, err}
end
return 1
