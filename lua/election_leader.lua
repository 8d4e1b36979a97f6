#!lua flags=no-writes
-- election_leader.lua: reads an election's leader record and whether its leader still holds the
-- election's fair lock, in one step, without changing anything.
-- KEYS[1]  the fair lock's hash (the election's name)
-- KEYS[2]  the leader record, a hash "{name}:rlock_election": owner, term, value, since
-- Returns {held, term, value, since}: held 1 while the recorded leader holds the lock, else 0
--         (the record of a leader that resigned or lost its hold, or none: term 0, value "");
--         term is the last leader's term either way, since its start on the server's clock (ms)
local r = redis.call('hmget', KEYS[2], 'owner', 'term', 'value', 'since')
local held = 0
if r[1] then
    held = redis.call('hexists', KEYS[1], r[1])
end
return {held, tonumber(r[2]) or 0, r[3] or '', tonumber(r[4]) or 0}
