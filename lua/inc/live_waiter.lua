-- inc/live_waiter.lua: spliced by cmake/rlock_embed_lua.cmake into the scripts that name it on an
-- include line (Redis scripts cannot call each other).
-- live_waiter(zset): the member of a waiters zset (member -> liveness deadline, server ms) that is
-- still live (deadline ahead on the server's clock) with the earliest deadline, or nil. The one
-- waiter a release wakes: waiting writers of the read-write lock, waiting rlock clients of the
-- reentrant lock. A waiter that died stops refreshing its deadline, so it is chosen at most until
-- its deadline passes. The earliest member is read first: with nobody waiting (the common case
-- of a release) that one ZRANGE is all, and a live earliest member needs no range by score.
local function live_waiter(zset)
    local first = redis.call('zrange', zset, 0, 0, 'withscores')
    if first[1] == nil then
        return nil
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if tonumber(first[2]) > now then
        return first[1]
    end
    return redis.call('zrangebyscore', zset, '(' .. now, '+inf', 'limit', 0, 1)[1]
end
