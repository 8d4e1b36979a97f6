-- sem_set_permits.lua: make the semaphore's total permits n (Redisson
-- RPermitExpirableSemaphore.setPermits: the total is the available count plus the leased permits
-- in the zset; a never-set semaphore is SET to n; the available count moves by the difference and
-- may go below 0). Redisson publishes n; rlock publishes only when permits became available, at
-- most the increase, a value Redisson's subscribers read as a wake-up bound.
-- The request key makes a resend of the same call a no-op that returns the first run's reply.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the leased permits zset {name}:timeout
-- KEYS[3]  the channel redisson_sc:{name}
-- KEYS[4]  the request key {name}:rlock_request:<32 hex digits> (unique per call)
-- ARGV[1]  n, the new total (>= 0)
-- ARGV[2]  how long the request key is kept, ms
-- Returns the available permits after the change (for a resend: what the first run returned).
-- The leased permits are counted with ZRANGE where Redisson uses ZCOUNT (every score is >= 0, so
-- both count every member): ZCOUNT is not in docs/acl.md's minimal command set.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[4])
if done then
    return tonumber(done)
end
local n = tonumber(ARGV[1])
local available = redis.call('get', KEYS[1])
local total = n
local freed = n
if available == false then
    redis.call('set', KEYS[1], n)
else
    local maximum = #redis.call('zrange', KEYS[2], 0, -1) + tonumber(available)
    freed = n - maximum
    total = tonumber(available)
    if freed ~= 0 then
        total = redis.call('incrby', KEYS[1], freed)
    end
end
if freed > 0 and total > 0 then
    redis.pcall('publish', KEYS[3], math.min(total, freed))
end
redis.call('set', KEYS[4], total, 'px', ARGV[2])
return total
