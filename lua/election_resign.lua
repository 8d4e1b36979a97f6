#!lua flags=allow-oom
-- election_resign.lua: a leader that resigns takes its value out of the leader record (the term
-- stays, so that later terms are still compared with it) before it releases the fair lock, and
-- wakes the observers. A record of another owner (a later leader) is left alone.
-- KEYS[1]  the leader record, a hash "{name}:rlock_election"
-- KEYS[2]  the observers' channel, rlock_election:{name}
-- ARGV[1]  the resigning owner field "<client-uuid>:<thread-id>"
-- Returns 0  the record is not this owner's (nothing changed)
--         1  cleared and published "0"
--         {1, err}  cleared, but the PUBLISH was refused (err: Redis' text)
--@include inc/notify.lua
if redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
    return 0
end
redis.call('hdel', KEYS[1], 'owner', 'value', 'since')
local err = notify(KEYS[2], '0')
if err then
    return {1, err}
end
return 1
