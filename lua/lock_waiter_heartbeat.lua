#!lua flags=allow-oom
-- lock_waiter_heartbeat.lua: the watchdog's batch refresh of the liveness deadlines of threads
-- waiting for a reentrant lock (rlock only; Redisson's own waiters are not recorded). A waiter
-- missing from the zset (purged after its process stalled) is put back, since it is
-- demonstrably alive; a waiter that already holds the lock is left out.
-- KEYS[1..N]   lock hashes (lock names); the zset is rlock_lock_waiters:{name}, the waiting
--              flag (lock_release.lua) rlock_lock_wake:{name}, the grant hash rlock_lock_waiters:{name}:grants
-- ARGV[1]      liveness timeout in ms: new deadline = server time + timeout
-- ARGV[2..N+1] owner field "<uuid>:<tid>" of each waiting thread, in order
-- Returns an array of N integers, all 1 (a waiter is never "lost").
--@include inc/waiter_heartbeat.lua
return waiter_heartbeat('rlock_lock_waiters', 'rlock_lock_wake', true)
