#!lua flags=allow-oom
-- rw_writer_leave.lua: a waiting writer gives up (timeout or error): it leaves the waiting-writers
-- zset and, if it was there, wakes every waiter, since readers may have been waiting behind it.
-- KEYS[1]  the waiting-writers zset, rlock_rwlock_writers:{name}
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  write owner field "<uuid>:<tid>:write"
-- Returns 1 if the writer was waiting, 0 if not.
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
    redis.call('publish', KEYS[2], 1)
    return 1
end
return 0
