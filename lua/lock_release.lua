#!lua flags=allow-oom
-- lock_release.lua: release one hold of a reentrant lock (Redisson RLock data); the last release
-- deletes the hash and publishes Redisson's unlock message so one waiter per process wakes up.
-- When rlock threads wait (the waiters zset), it names ONE of them instead, the live one with the
-- earliest deadline, on that thread's client's own wake channel rlock_lock_wake:{name}:<uuid>,
-- so one release reaches one waiting client however many wait. rlock waiters hear Redisson's
-- channel through a pattern that matches it alone, which PUBSUB NUMSUB does not count; so
-- NUMSUB > 0 means a plain subscriber (a Redisson waiter) listens there, and only then is
-- Redisson's "0" published too, announced by " 0" after the name (the named client lets that
-- "0" pass). A Redisson release sends no name: its "0" wakes one waiter per rlock client, as in
-- Redisson.
-- A named waiter that registered a grant TTL (KEYS[6], lock_acquire.lua) is GRANTED the lock here
-- when no plain subscriber listens: the script does what that waiter's attempt would do (hash
-- field = its owner, count 1, PEXPIRE the grant TTL, INCR of the token, out of the zset and the
-- grant hash) and the name on its wake channel becomes "grant <token> <wait> <owner>" (<wait>:
-- the waiting lock call's id), so the waiter returns without a command of its own. With a Redisson waiter listening, nothing is granted.
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_lock__channel:{name}
-- KEYS[3]  the waiters zset, rlock_lock_waiters:{name}; KEYS[3] and KEYS[4] may be absent
--          (RedLock's callers): only Redisson's message is sent then
-- KEYS[4]  the prefix of rlock's wake channels, rlock_lock_wake:{name} (":<uuid>" is appended:
--          the named waiter's member "<uuid>:<tid>" up to its last ':'); as a key, the waiting
--          flag that lock_acquire.lua sets beside the zset. The DEL of the lock hash takes the
--          flag with it, so a release nobody waits for runs Redisson's commands and no more.
-- KEYS[5]  the fencing counter, redisson_lock_token:{name}; KEYS[5] and KEYS[6] may be absent
--          (no grant is made then)
-- KEYS[6]  the grant hash, rlock_lock_waiters:{name}:grants (waiter -> "<grant TTL in ms>:<wait>")
-- ARGV[1]  lease in ms to keep when holds remain (only if longer than the PTTL)
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  message to publish on full release ("0" = wake one waiter)
-- Returns -1  the owner holds nothing (not the owner, or the lease ran out); nothing changed
--          0  one hold released, the owner still holds the lock
--          1  fully released and published (the lock may have been granted to a waiter)
--         {r, err}  the same r, but the PUBLISH was refused (err: Redis' NOPERM text): the release
--                   happened, waiters wake only when their wait bound (the lease) runs out
-- Publishing goes through redis.pcall (inc/notify.lua): a user without the publish permission
-- still releases instead of failing after the DEL, and the client logs the refusal once.
--@include inc/live_waiter.lua
--@include inc/notify.lua
-- One HGET both checks the owner and tells a partial release from the last one, which deletes
-- the hash at once (no HINCRBY to 0 before the DEL: the data ends the same).
local held = redis.call('hget', KEYS[1], ARGV[2])
if not held then
    return -1
end
if tonumber(held) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    -- Like a re-entry, a partial release never shortens the hold that remains.
    local remain = redis.call('pttl', KEYS[1])
    if remain >= 0 and remain < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
-- 2 deleted: the flag was set, rlock waiters may be recorded. The flag is set again while the
-- zset lives. A flag that is missing (expired early) costs a Redisson-style wake-up, not a
-- lost one: every rlock waiter hears Redisson's "0" too.
local w = nil
if KEYS[4] and redis.call('del', KEYS[1], KEYS[4]) == 2 then
    w = live_waiter(KEYS[3])
    local keep = redis.call('pttl', KEYS[3])
    if keep > 0 then
        redis.call('set', KEYS[4], '1', 'px', keep)
    end
elseif not KEYS[4] then
    redis.call('del', KEYS[1])
end
local err = nil
if w then
    -- A NUMSUB refused (an ACL without it) counts as a plain subscriber: publish as Redisson.
    local subs = redis.pcall('pubsub', 'numsub', KEYS[2])
    local plain = type(subs) ~= 'table' or subs.err ~= nil or subs[2] ~= 0
    local msg = plain and (w .. ' 0') or w
    local grant = (not plain and KEYS[6]) and redis.call('hget', KEYS[6], w)
    local ttl, wait = string.match(grant or '', '^(%d+):(%d+)$')
    if ttl then
        redis.call('hset', KEYS[1], w, 1)
        redis.call('pexpire', KEYS[1], ttl)
        redis.call('zrem', KEYS[3], w)
        redis.call('hdel', KEYS[6], w)
        msg = 'grant ' .. redis.call('incr', KEYS[5]) .. ' ' .. wait .. ' ' .. w
    end
    err = notify(KEYS[4] .. ':' .. string.match(w, '^(.*):'), msg)
    if plain then
        err = notify(KEYS[2], ARGV[3]) or err
    end
else
    err = notify(KEYS[2], ARGV[3])
end
if err then
    return {1, err}
end
return 1
