/*
 * The "Redisson peer" of the compat tests: a raw hiredis client speaking Redisson's RLock
 * protocol as redisson-protocol.md §2.1 describes it (script text written here from that
 * description), shared by test_redisson_compat (one server) and test_redisson_compat_cluster.
 */
#ifndef RLOCK_TESTS_REDISSON_PEER_H
#define RLOCK_TESTS_REDISSON_PEER_H

/* Redisson's RLock acquire (tryLockInnerAsync): KEYS[1] name; ARGV[1] lease ms, ARGV[2] owner.
 * nil when acquired, else the holder's PTTL. */
static const char *const peer_acquire =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";

/* The peer's owner field ("<uuid>:<thread id>"). */
#define PEER_OWNER "6f1c2b1e-0000-4000-8000-00000000beef:1"

#endif
