#!lua flags=allow-oom
-- rw_renew_write.lua: the watchdog's batch renewal of write holds: each hash is kept alive for at
-- least the lease while its write owner field is present (never shortened, so a longer lease of
-- another hold in the same hash is kept).
-- KEYS[1..N]   lock hashes (lock names)
-- ARGV[1]      lease in ms
-- ARGV[2..N+1] write owner field "<uuid>:<tid>:write" for each key, in order
-- Returns an array of N integers: 1 renewed, 0 the owner no longer holds that write lock.
local lease = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], math.max(redis.call('pttl', KEYS[i]), lease))
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
