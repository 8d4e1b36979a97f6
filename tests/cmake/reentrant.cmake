# tests/cmake/reentrant.cmake - acceptance tests of the reentrant lock (issue 3).
# Included from tests/CMakeLists.txt; paths are relative to tests/. Every program starts its own
# redis-server(s) through tests/harness; none needs a server at 6379.
if(NOT TARGET rlock_harness)
  return()
endif()

# RedissonLockTest scenarios: lock/unlock, reentrancy, hold counts, other threads, force unlock,
# expiry, TTL, tryLock wait bounds, Redis down.
rlock_add_test(NAME test_reentrant_basic SOURCES reentrant/test_reentrant_basic.c
               LABELS redis TIMEOUT 90)

# Mutual exclusion: 4 processes x 8 threads on one name, SET NX flag + GET/SET counter checker.
rlock_add_test(NAME test_reentrant_stress SOURCES reentrant/test_reentrant_stress.c
               LABELS redis stress TIMEOUT 150)

# Watchdog (1500 ms): SIGKILLed holder frees within the lease, a 10 s hold stays held, 10,000
# holds kept alive over 3 rounds in batched, pipelined renewals.
rlock_add_test(NAME test_reentrant_watchdog SOURCES reentrant/test_reentrant_watchdog.c
               LABELS redis fault TIMEOUT 120)

# Lost leases: key deleted / server paused past the lease -> on_lost once, RLOCK_ELOST, larger
# next token; explicit leases expire silently.
rlock_add_test(NAME test_reentrant_lost SOURCES reentrant/test_reentrant_lost.c
               LABELS redis fault TIMEOUT 90)

# Waiting through pub/sub: bounded acquire attempts (INFO commandstats), no traffic while
# parked, no leaked channels, CLIENT KILL TYPE pubsub strands nobody.
rlock_add_test(NAME test_reentrant_waiting SOURCES reentrant/test_reentrant_waiting.c
               LABELS redis fault TIMEOUT 90)

# Fencing tokens: strictly increasing across threads/handles/clients, kept on re-entry, 0 when
# not held, never reset.
rlock_add_test(NAME test_reentrant_fencing SOURCES reentrant/test_reentrant_fencing.c
               LABELS redis TIMEOUT 60)

# Bad input: NULL/empty/oversized names, binary names (spaces, CRLF, 0x01..0xFF), bad and extreme
# durations, unlock twice, calls after the client is freed.
rlock_add_test(NAME test_reentrant_badinput SOURCES reentrant/test_reentrant_badinput.c
               LABELS redis TIMEOUT 60)

# The example: examples/counter run against a harness server must report an exact count.
if(RLOCK_BUILD_EXAMPLES AND EXISTS "${PROJECT_SOURCE_DIR}/examples/counter.c")
  rlock_add_test(NAME test_reentrant_example SOURCES reentrant/test_reentrant_example.c
                 LABELS redis TIMEOUT 90 ARGS $<TARGET_FILE:example_counter>)
endif()

# No thundering herd (issue 18): with 16 waiting clients one release grants the lock to one of
# them and causes no acquire attempt (INFO commandstats); grants whose message is lost (the wait
# running out, the next attempt, a killed subscriber) are still taken once; a grant to a waiter
# killed while waiting stalls the lock at most its grant TTL; leases longer than the grant TTL are
# extended at once; a Redisson subscriber means no grant. ~10 s.
rlock_add_test(NAME test_reentrant_herd SOURCES reentrant/test_reentrant_herd.c
               LABELS redis fault TIMEOUT 120)

# RLOCK_SPIN (issue 32): a user without subscribe gets spin locks; hand-offs within the
# back-off's 128 ms maximum; spin and reentrant threads exclude each other (independent
# checker); a Redisson-protocol peer and a release without a message. ~10 s.
rlock_add_test(NAME test_spin SOURCES reentrant/test_spin.c LABELS redis TIMEOUT 90)
