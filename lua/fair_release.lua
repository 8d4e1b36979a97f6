#!lua flags=allow-oom
-- fair_release.lua: release one hold of a fair lock (Redisson RFairLock data); the last release
-- deletes the hash and notifies only the first live waiter, on its own channel. Dropping dead
-- heads notifies the new first waiter too, so that it re-arms its wait bound.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name} (a waiter's channel is
--          this + ":" + its owner)
-- ARGV[1]  lease in ms to keep when holds remain (only if longer than the PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  message to publish ("0" = unlock)
-- KEYS[5]  the fencing counter, redisson_lock_token:{name}; KEYS[5] and KEYS[6] may be absent
--          (no grant is made then)
-- KEYS[6]  the grant hash, rlock_lock_waiters:{name}:grants (waiter -> "<grant TTL in ms>:<wait>")
-- On full release, a first live waiter that registered a grant (an rlock waiter, fair_acquire.lua)
-- is GRANTED the lock here, as its attempt would take it (LPOP, ZREM, hash field = owner, count 1,
-- PEXPIRE grant TTL, INCR of the token), and its channel gets "grant <token> <wait> <owner>"
-- instead of "0": it returns without a command of its own. The next waiter gets the "0" with
-- which an attempt's grant re-arms it only if it registered no grant (a Redisson waiter): an
-- rlock waiter's wait bound is capped at the waiter timeout instead (fair_acquire.lua), which
-- spares it an attempt per hand-off, run just as the granted waiter is being woken.
-- Returns -1  the owner holds nothing (if the lock is free, the first waiter is notified anyway,
--             since its holder's lease ran out without a message)
--          0  one hold released, the owner still holds the lock
--          1  fully released; the first live waiter (if any) was notified (or granted the lock)
--         {r, err}  the same r, but the PUBLISH was refused (err: Redis' NOPERM text): the release
--                   happened, waiters wake only when their wait bound (the lease) runs out
-- Publishing goes through redis.pcall (inc/notify.lua): a user without the publish permission
-- still releases instead of failing after the DEL, and the client logs the refusal once.
redis.replicate_commands()
--@include inc/fair_purge.lua
--@include inc/notify.lua
local first = redis.call('lindex', KEYS[2], 0)
local head = nil
if first then
    -- The server's clock only when someone queues (dead heads are dropped by their deadline).
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    head = fair_purge(KEYS[2], KEYS[3], now, first)
end
local result
-- One HGET checks the owner and tells a partial release from the last one, which deletes the
-- hash at once (no HINCRBY to 0 before the DEL: the data ends the same).
local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    result = -1
    if redis.call('exists', KEYS[1]) == 0 then
        first = nil
    end
elseif tonumber(held) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    -- Like a re-entry, a partial release never shortens the hold that remains.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    result = 0
else
    redis.call('del', KEYS[1])
    first = nil
    result = 1
end
local msg = ARGV[3]
local g = (result == 1 and head and KEYS[6]) and redis.call('hget', KEYS[6], head)
local ttl, wait = string.match(g or '', '^(%d+):(%d+)$')
if ttl then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    redis.call('hdel', KEYS[6], head)
    redis.call('hset', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], ttl)
    msg = 'grant ' .. redis.call('incr', KEYS[5]) .. ' ' .. wait .. ' ' .. head
end
local err = nil
if head and head ~= first then
    err = notify(KEYS[4] .. ':' .. head, msg)
end
local nxt = ttl and redis.call('lindex', KEYS[2], 0)
if nxt and redis.call('hexists', KEYS[6], nxt) == 0 then
    -- The grant's notice to a new first waiter that is not an rlock waiter (it re-arms its wait
    -- bound), after the grant.
    redis.pcall('publish', KEYS[4] .. ':' .. nxt, '0')
end
if err then
    return {result, err}
end
return result
