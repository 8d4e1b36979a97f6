-- inspect.lua: read every key of one lock without changing anything (the `rlock status` view).
-- Works on whatever lock type wrote the keys (reentrant, fair, read-write, by rlock or Redisson),
-- so it reads the union of their keys and leaves the judgement of the type to the caller.
-- KEYS[1]  the lock hash (the lock name)
-- KEYS[2]  the fair waiter queue, redisson_lock_queue:{name} (list of owners, arrival order)
-- KEYS[3]  the fair waiter deadlines, redisson_lock_timeout:{name} (zset owner -> ms)
-- KEYS[4]  the fencing counter, redisson_lock_token:{name}
-- KEYS[5]  the waiting writers, rlock_rwlock_writers:{name} (zset write owner -> ms)
-- KEYS[6]  the waiting rlock threads of a reentrant lock, rlock_lock_waiters:{name}
--          (zset owner -> liveness deadline ms)
-- Returns {0, type} when KEYS[1] exists but is not a hash (type = Redis' name for it), else
--         {1, now, pttl, token, fields, queue, writers, waiters} where now is the server's
--         clock in ms,
--         pttl the hash's PTTL (-2 absent, -1 no expiry), token the counter (0 if unset),
--         fields the hash as a flat {field, value, ...} array, queue a flat {owner, deadline, ...}
--         array in queue order (deadline -1 when the owner has no score), and writers and
--         waiters flat {owner, deadline, ...} arrays ordered by deadline.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
    return {0, kind}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = tonumber(redis.call('get', KEYS[4]) or '0')
local queue = {}
if redis.call('type', KEYS[2])['ok'] == 'list' then
    local zset = redis.call('type', KEYS[3])['ok'] == 'zset'
    for _, owner in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
        local score = zset and redis.call('zscore', KEYS[3], owner)
        queue[#queue + 1] = owner
        queue[#queue + 1] = score and tonumber(score) or -1
    end
end
local function by_deadline(key)
    local list = {}
    if redis.call('type', key)['ok'] == 'zset' then
        list = redis.call('zrange', key, 0, -1, 'withscores')
        for i = 2, #list, 2 do
            list[i] = tonumber(list[i])
        end
    end
    return list
end
local writers = by_deadline(KEYS[5])
local waiters = by_deadline(KEYS[6])
local fields = {}
if kind == 'hash' then
    fields = redis.call('hgetall', KEYS[1])
end
return {1, now, redis.call('pttl', KEYS[1]), token, fields, queue, writers, waiters}
