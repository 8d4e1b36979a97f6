#!lua flags=allow-oom
-- rw_writer_heartbeat.lua: the watchdog's batch refresh of waiting writers' liveness deadlines
-- (server clock). A waiting writer missing from the zset (purged after its process stalled) is put
-- back, since it is demonstrably alive; a writer that already holds the lock is left out.
-- KEYS[1..N]   lock hashes (lock names); the zset is rlock_rwlock_writers:{name}
-- ARGV[1]      liveness timeout in ms: new deadline = server time + timeout
-- ARGV[2..N+1] write owner field "<uuid>:<tid>:write" of each waiting writer, in order
-- Returns an array of N integers, all 1 (a waiting writer is never "lost").
--@include inc/waiter_heartbeat.lua
return waiter_heartbeat('rlock_rwlock_writers')
