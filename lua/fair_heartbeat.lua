#!lua flags=allow-oom
-- fair_heartbeat.lua: the watchdog's batch liveness refresh of fair-lock waiters, and the sweep
-- that removes dead waiters from anywhere in a queue within a bounded time.
-- Each live waiter's deadline becomes server now + the waiter timeout (and rlock's grant hash
-- rlock_lock_waiters:{name}:grants lives two waiter timeouts more, if it exists); a waiter that is no
-- longer in the zset (swept after missed heartbeats, or dropped by a Redisson client's purge after
-- its grant shifted every score) is sent "0" on its own channel so that it joins again at once
-- instead of sleeping until its wait bound. Then, once per lock, up to 100 waiters whose
-- deadline has passed (their process stopped refreshing) leave the zset and the queue; if that
-- changed who is first in line, the new first waiter is notified (it may have to take a free
-- lock, or re-arm its wait bound on the holder's lease). The queue, zset and channel are derived
-- from the lock name as Redisson derives them ("prefix:{name}", or "prefix:name" when the name
-- already has a hash tag), so they share the lock name's hash slot.
-- KEYS[1..N]    lock names (hashes), one per waiter; a name may repeat
-- ARGV[1]       waiter timeout in ms
-- ARGV[2..N+1]  the waiting owner "<client-uuid>:<thread-id>" of each key, in order
-- Returns an array of N integers: 1 refreshed, 0 the waiter is no longer queued.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
redis.replicate_commands()
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function tag(name)
    if string.find(name, '{', 1, true) then
        return name
    end
    return '{' .. name .. '}'
end
local result = {}
for i = 1, #KEYS do
    local zset = 'redisson_lock_timeout:' .. tag(KEYS[i])
    if redis.call('zscore', zset, ARGV[i + 1]) then
        redis.call('zadd', zset, now + tonumber(ARGV[1]), ARGV[i + 1])
        -- rlock's grant hash (fair_acquire.lua) lives while its waiters do.
        redis.call('pexpire', 'rlock_lock_waiters:' .. tag(KEYS[i]) .. ':grants', 2 * tonumber(ARGV[1]))
        result[i] = 1
    else
        redis.pcall('publish', 'redisson_lock__channel:' .. tag(KEYS[i]) .. ':' .. ARGV[i + 1], '0')
        result[i] = 0
    end
end
local swept = {}
for i = 1, #KEYS do
    local name = KEYS[i]
    if not swept[name] then
        swept[name] = true
        local x = tag(name)
        local zset = 'redisson_lock_timeout:' .. x
        local dead = redis.call('zrangebyscore', zset, '-inf', now, 'limit', 0, 100)
        if #dead > 0 then
            local queue = 'redisson_lock_queue:' .. x
            local first = redis.call('lindex', queue, 0)
            for _, w in ipairs(dead) do
                redis.call('zrem', zset, w)
                redis.call('lrem', queue, 1, w)
            end
            local head = redis.call('lindex', queue, 0)
            if head and head ~= first then
                redis.pcall('publish', 'redisson_lock__channel:' .. x .. ':' .. head, '0')
            end
        end
    end
end
return result
