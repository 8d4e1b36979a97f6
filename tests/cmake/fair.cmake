# tests/cmake/fair.cmake - the fair lock's tests (tests/fair/). Included from tests/CMakeLists.txt;
# paths are relative to tests/. Every program starts its own redis-server(s) via the harness.
if(NOT TARGET rlock_harness)
  return()
endif()

# Basic set, data layout, per-waiter notification, heartbeats (~10 s).
rlock_add_test(NAME test_fair_basic SOURCES fair/test_fair_basic.c LABELS redis TIMEOUT 90)

# FIFO across threads, clients and processes; 500 threads; 20 x 50 waiters in 4 processes.
rlock_add_test(NAME test_fair_order SOURCES fair/test_fair_order.c LABELS redis TIMEOUT 120)

# Crashed waiters, give-ups, CLIENT PAUSE WRITE mid-wait, deadline drift (~20 s).
rlock_add_test(NAME test_fair_fault SOURCES fair/test_fair_fault.c LABELS redis fault TIMEOUT 120)

# Redis commands per grant / enqueue / give-up at 10 and 2,000 waiters (INFO commandstats).
rlock_add_test(NAME test_fair_cost SOURCES fair/test_fair_cost.c LABELS redis TIMEOUT 60)

# Mutual exclusion: 4 processes x 6 threads, independent checker, exact count.
rlock_add_test(NAME test_fair_stress SOURCES fair/test_fair_stress.c LABELS redis stress
               TIMEOUT 120)

# A raw client speaking Redisson's RFairLock protocol and rlock on one fair lock.
rlock_add_test(NAME test_fair_compat SOURCES fair/test_fair_compat.c LABELS redis TIMEOUT 90)

# The fair scripts' edge cases, run directly with synthetic owners.
rlock_add_test(NAME test_fair_scripts SOURCES fair/test_fair_scripts.c LABELS redis TIMEOUT 60)

# The FIFO job example and its checker (the examples are added after the tests, so the target is
# named by a generator expression, resolved when the build files are generated).
if(RLOCK_BUILD_EXAMPLES)
  rlock_add_test(NAME test_fair_example SOURCES fair/test_fair_example.c LABELS redis TIMEOUT 60
                 ARGS "$<TARGET_FILE:example_fifo_jobs>")
endif()

# Direct grants (issue 18): a release grants the lock to the first rlock waiter (no attempt after
# it but the next waiter's re-arm), a grant whose message is lost is taken once (the wait running
# out, a killed subscriber). ~3 s.
rlock_add_test(NAME test_fair_grant SOURCES fair/test_fair_grant.c LABELS redis fault TIMEOUT 60)

# Leader election on the fair lock (issue 32): the API, then 5 candidate processes whose leader
# is SIGKILLed, SIGSTOPped and resigns; terms strictly increase, never two leaders acting at once
# (independent checker), observers woken within 50 ms. ~6 s.
rlock_add_test(NAME test_election SOURCES fair/test_election.c LABELS redis fault TIMEOUT 90)
