#!lua flags=allow-oom
-- fair_leave.lua: a waiter of a fair lock gives up (its wait elapsed, or an error ended it) and
-- leaves the queue and the zset. If it was first in line, the next live waiter is notified: it
-- may have to take the hand-off this waiter was sent, or re-arm its wait bound.
-- The list removal is O(1) when the waiter is first or last in line, else one LREM that stops at
-- the waiter (a scan inside Redis, no per-waiter script work); the zset removal is O(log N).
-- KEYS[1]  the lock hash (the lock name): the leaving owner's field there means it was granted
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  owner "<client-uuid>:<thread-id>"
-- ARGV[2]  message to publish ("0" = unlock)
-- KEYS[5]  the fencing counter, redisson_lock_token:{name}; may be absent with KEYS[6]
-- KEYS[6]  the grant hash, rlock_lock_waiters:{name}:grants (the owner's field goes); may be absent
-- Returns 1 if the owner was queued (list or zset), 0 if it was not, {2, token} if a release
-- granted it the lock (fair_release.lua) before it left: it holds the lock, with the counter's
-- value as its token.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
redis.replicate_commands()
--@include inc/fair_purge.lua
local first = redis.call('lindex', KEYS[2], 0)
if KEYS[6] then
    redis.call('hdel', KEYS[6], ARGV[1])
    if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
        return {2, tonumber(redis.call('get', KEYS[5]) or '0')}
    end
end
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if first == ARGV[1] then
    redis.call('lpop', KEYS[2])
    removed = 1
elseif redis.call('lindex', KEYS[2], -1) == ARGV[1] then
    redis.call('rpop', KEYS[2])
    removed = 1
elseif first and redis.call('lrem', KEYS[2], 1, ARGV[1]) > 0 then
    removed = 1
end
if first ~= ARGV[1] then
    return removed
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = fair_purge(KEYS[2], KEYS[3], now, redis.call('lindex', KEYS[2], 0))
if head then
    redis.pcall('publish', KEYS[4] .. ':' .. head, ARGV[2])
end
return removed
