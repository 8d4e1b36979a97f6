-- redlock_raise_token.lua: raise a lock's fencing counter to at least a given value. A RedLock
-- grant writes its token (the largest counter among the granting servers) back to every granting
-- server, so that the counters of any majority have passed every token handed out before.
-- The counter only ever grows, so a Redisson client INCRementing the same key stays compatible.
-- KEYS[1]  the fencing counter, redisson_lock_token:{name}
-- ARGV[1]  the token to reach (a positive integer)
-- Returns the counter's value afterwards.
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
    redis.call('set', KEYS[1], ARGV[1])
    return wanted
end
return current
