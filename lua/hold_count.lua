#!lua
-- hold_count.lua: the hold count of one owner's field in a lock hash, as a script so that a
-- client that syncs to replicas can send the replicas' WAIT behind it: a node that answers with
-- no replica acknowledging may have lost its data without knowing yet that it was replaced (a
-- restarted master before the cluster demotes it), and its count is not believed.
-- KEYS[1]  the lock hash (the lock name)
-- ARGV[1]  the owner's field
-- Returns the count: 0 when the field or the key is gone
return tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
