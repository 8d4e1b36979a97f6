#!lua flags=allow-oom
-- renew_hash.lua: the watchdog's batch renewal of hash-based holds (reentrant, fair, write):
-- one call renews up to a batch of holds, each only if its owner field is still present.
-- KEYS[1..N]  lock hashes
-- ARGV[1]     lease in ms (PEXPIRE)
-- ARGV[2..N+1] owner field for each key, in order
-- Returns an array of N integers: 1 renewed, 0 the owner no longer holds that lock.
local result = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
