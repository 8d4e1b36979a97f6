#!lua
-- election_claim.lua: records the new leader of an election once its campaign was granted the
-- election's fair lock, and wakes every observer. Only a candidate that still holds the lock is
-- recorded, so a record never names a leader whose hold already ran out.
-- KEYS[1]  the fair lock's hash (the election's name)
-- KEYS[2]  the leader record, a hash "{name}:rlock_election": owner, term, value, since
-- KEYS[3]  the observers' channel, rlock_election:{name}
-- ARGV[1]  the candidate's owner field "<client-uuid>:<thread-id>"
-- ARGV[2]  its term (the fair lock's fencing token of this hold)
-- ARGV[3]  its value (host:port, an id ...)
-- Returns 0  the candidate does not hold the lock (nothing written)
--         1  recorded and published "0"
--         {1, err}  recorded, but the PUBLISH was refused (err: Redis' text)
--@include inc/notify.lua
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('hset', KEYS[2], 'owner', ARGV[1], 'term', ARGV[2], 'value', ARGV[3], 'since', now)
local err = notify(KEYS[3], '0')
if err then
    return {1, err}
end
return 1
