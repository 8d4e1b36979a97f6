-- sem_acquire_cancel.lua: settles an acquire call that would end without permits although one of
-- its attempts may have taken them (a reply lost, or a grant the replicas did not acknowledge).
-- If the call's request key (see sem_acquire.lua) says "taken", mode "keep" leaves the permits to
-- the call (which then reports them) and mode "give" gives back those still leased to it. Else
-- the key becomes "0" (cancelled), so that no copy of the call's attempts still on its way takes
-- anything. Running it again changes nothing more.
-- KEYS[1]  the permits counter (the semaphore name)
-- KEYS[2]  the channel redisson_sc:{name}
-- KEYS[3]  the leased permits zset {name}:timeout
-- KEYS[4]  the acquire call's request key {name}:rlock_request:<32 hex digits>
-- ARGV[1]  n, the permits the call asked for
-- ARGV[2]  how long the request key is kept, ms
-- ARGV[3]  mode: "keep" or "give"
-- ARGV[4..] the call's permit ids (raw bytes) for a leased acquire, none for plain permits
-- Returns 2 the call had taken the permits and keeps them ("keep", and every leased one still
--         held), 1 it had taken them and they went back to the pool, 0 it had not (now
--         cancelled).
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
local done = redis.call('get', KEYS[4])
if done == '1' and ARGV[3] == 'keep' then
    local held = true
    for i = 4, #ARGV do
        held = held and redis.call('zscore', KEYS[3], ARGV[i]) ~= false
    end
    if held then
        return 2
    end
end
redis.call('set', KEYS[4], '0', 'px', ARGV[2])
if done ~= '1' then
    return 0
end
local back = tonumber(ARGV[1])
if #ARGV > 3 then
    -- A leased permit whose lease ran out was returned to the pool already (by a reclaim).
    back = redis.call('zrem', KEYS[3], unpack(ARGV, 4))
end
if back > 0 then
    local total = redis.call('incrby', KEYS[1], back)
    if total > 0 then
        redis.pcall('publish', KEYS[2], math.min(total, back))
    end
end
return 1
