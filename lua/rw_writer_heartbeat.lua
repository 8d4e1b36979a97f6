#!lua flags=allow-oom
-- rw_writer_heartbeat.lua: the watchdog's batch refresh of waiting writers' liveness deadlines
-- (server clock). A waiting writer missing from the zset (purged after its process stalled) is put
-- back, since it is demonstrably alive; a writer that already holds the lock is left out.
-- KEYS[1..N]   lock hashes (lock names); the zset is rlock_rwlock_writers:{name}
-- ARGV[1]      liveness timeout in ms: new deadline = server time + timeout
-- ARGV[2..N+1] write owner field "<uuid>:<tid>:write" of each waiting writer, in order
-- Returns an array of N integers, all 1 (a waiting writer is never "lost").
local timeout = tonumber(ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result = {}
for i = 1, #KEYS do
    local name = KEYS[i]
    if redis.call('hexists', name, ARGV[i + 1]) == 0 then
        -- Redisson's prefixName: "prefix:{name}" unless the name carries its own hash tag.
        local zset = 'rlock_rwlock_writers:{' .. name .. '}'
        if string.find(name, '{', 1, true) then
            zset = 'rlock_rwlock_writers:' .. name
        end
        redis.call('zadd', zset, now + timeout, ARGV[i + 1])
        redis.call('pexpire', zset, math.max(redis.call('pttl', zset), timeout))
    end
    result[i] = 1
end
return result
