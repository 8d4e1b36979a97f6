#!lua flags=allow-oom
-- rw_writer_leave.lua: a waiting writer gives up (timeout or error): it leaves the waiting-writers
-- zset and, if it was there, wakes every reader, since readers may have been waiting behind it,
-- and one other waiting writer, since a release may have woken this writer alone.
-- KEYS[1]  the waiting-writers zset, rlock_rwlock_writers:{name}
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  prefix of waiting writers' channels, rlock_rwlock_writer:{name} (+ ":" + write field)
-- ARGV[1]  write owner field "<uuid>:<tid>:write"
-- Returns 1 if the writer was waiting, 0 if not.
-- Publishing goes through redis.pcall: a user without the publish permission still runs the
-- script to its end (no half-applied change); waiters then wake by their wait bound.
--@include inc/live_waiter.lua
--@include inc/rw_wake_writer.lua
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
    redis.pcall('publish', KEYS[2], 1)
    rw_wake_writer(KEYS[1], KEYS[3])
    return 1
end
return 0
