#!lua
-- fair_acquire.lua: one attempt on a fair lock (Redisson RFairLock data): take it if it is free
-- and the caller is first in line, re-enter it, or join the waiter queue (or stay in it).
-- A queued waiter's zset score is a liveness deadline on the server's clock (now + waiter
-- timeout) refreshed by heartbeats; no other score is ever shifted, so every step is O(log N) in
-- the number of waiters (plus one step per dead head dropped, each dropped once).
-- Whoever makes a waiter first in line notifies it ("0" on its own channel), so the first waiter
-- always re-arms its wait bound on the current holder's lease: here, a grant notifies the next
-- waiter, and dropping dead heads notifies the new first waiter.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name} (list of owners, arrival order)
-- KEYS[3]  the waiter deadlines, redisson_lock_timeout:{name} (zset owner -> server ms)
-- KEYS[4]  the fencing counter, redisson_lock_token:{name} (never reset, no TTL)
-- KEYS[5]  the channel prefix, redisson_lock__channel:{name} (a waiter's channel is
--          this + ":" + its owner)
-- ARGV[1]  lease in ms (PEXPIRE of the hash; on re-entry only if longer than its PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  waiter timeout in ms: the caller's new deadline is server now + this
-- ARGV[4]  "1": join (or stay in) the queue when busy; "0": single attempt, never joins
-- KEYS[6]  the grant hash, rlock_lock_waiters:{name}:grants (rlock only: owner -> "<ttl>:<wait>", the TTL in
--          ms a release that grants the lock to this waiter gives it and the id of the waiting
--          lock call, see fair_release.lua); may be absent (no grant is registered then)
-- ARGV[5]  the grant TTL in ms to register when the caller queues (0 or absent: none)
-- ARGV[6]  the id of the caller's lock call (a number unique in its process), with ARGV[5]
-- ARGV[7]  "1" when the caller already waits (an attempt after it queued): its own field in the
--          hash then means a release granted it the lock (a waiting thread cannot hold it), which
--          is taken as it stands (PEXPIRE to ARGV[1]) with no second hold and no new token
-- Returns {1, token}          acquired from free; token is the new counter value; or granted
--                             to this waiting caller by a release: token = the counter (GET)
--         {1, 0}              re-entered by the same owner; the owner keeps its token
--         {0, bound, joined}  busy; bound = ms after which to try again unless notified
--                             (-1: unknown), joined = 1 if the caller was appended just now
-- Publishing goes through redis.pcall: a user without the publish permission must not stop the
-- script halfway (after the LPOP of its grant).
redis.replicate_commands()
--@include inc/fair_purge.lua
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Dead heads (deadline passed, or no deadline at all) leave the queue.
local first = redis.call('lindex', KEYS[2], 0)
local head = fair_purge(KEYS[2], KEYS[3], now, first)
if redis.call('exists', KEYS[1]) == 0 and ((not head) or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
        local nxt = redis.call('lindex', KEYS[2], 0)
        if nxt then
            redis.pcall('publish', KEYS[5] .. ':' .. nxt, '0')
        end
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    if KEYS[6] then
        redis.call('hdel', KEYS[6], ARGV[2])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[4])}
end
if head and head ~= first and head ~= ARGV[2] then
    redis.pcall('publish', KEYS[5] .. ':' .. head, '0')
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[7] == '1' then
        -- Granted by a release while this thread waited (its message was not seen).
        redis.call('pexpire', KEYS[1], ARGV[1])
        return {1, tonumber(redis.call('get', KEYS[4]) or '0')}
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
-- Busy. While the lock is held, its remaining lease bounds the wait (an expiry publishes
-- nothing); while it is free, the first waiter is being handed it or is dead, which its
-- deadline bounds (and it notifies the next waiter when it takes the lock). A Redisson waiter's
-- deadline can be minutes away, so that bound is capped at the waiter timeout.
local bound = redis.call('pttl', KEYS[1])
if bound == -2 then
    bound = tonumber(redis.call('zscore', KEYS[3], head)) - now
    bound = math.max(1, math.min(bound, tonumber(ARGV[3])))
end
-- A waiter that registers for grants is not re-armed when the waiter before it is granted the
-- lock (fair_release.lua), so it re-attempts at least once per waiter timeout.
if tonumber(ARGV[5] or '0') > 0 and (bound < 0 or bound > tonumber(ARGV[3])) then
    bound = tonumber(ARGV[3])
end
if ARGV[4] ~= '1' then
    return {0, bound, 0}
end
local deadline = now + tonumber(ARGV[3])
local grant = tonumber(ARGV[5] or '0')
if KEYS[6] and grant > 0 then
    redis.call('hset', KEYS[6], ARGV[2], grant .. ':' .. ARGV[6])
    redis.call('pexpire', KEYS[6], math.max(redis.call('pttl', KEYS[6]), 2 * tonumber(ARGV[3])))
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
    redis.call('zadd', KEYS[3], deadline, ARGV[2])
    return {0, bound, 0}
end
redis.call('zadd', KEYS[3], deadline, ARGV[2])
redis.call('rpush', KEYS[2], ARGV[2])
return {0, bound, 1}
