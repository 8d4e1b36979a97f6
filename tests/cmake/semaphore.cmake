# tests/cmake/semaphore.cmake - semaphores and the count-down latch (tests/semaphore/). Included
# from tests/CMakeLists.txt; paths are relative to tests/. Every program starts its own
# redis-server via the harness.
if(NOT TARGET rlock_harness)
  return()
endif()

# Bad input, plain and leased permits, at-most-k wake-ups, no lost wake-up, commands of a
# blocked waiter, latch calls (~10 s).
rlock_add_test(NAME test_sem_basic SOURCES semaphore/test_sem_basic.c LABELS redis TIMEOUT 120)

# At most N inside: N = 3, 4 processes x 4 threads x 200 acquire/release, independent checker.
rlock_add_test(NAME test_sem_stress SOURCES semaphore/test_sem_stress.c LABELS redis stress
               TIMEOUT 300)

# Watchdog permits: held 3x the timeout, back within timeout + tick after SIGKILL; on_lost;
# a release lost while the subscriber connection is down does not strand waiters.
rlock_add_test(NAME test_sem_fault SOURCES semaphore/test_sem_fault.c LABELS redis fault
               TIMEOUT 90)

# Latch: 8 count-downs from 3 processes release 4 waiters of 4 other processes promptly.
rlock_add_test(NAME test_latch_procs SOURCES semaphore/test_latch_procs.c LABELS redis
               TIMEOUT 90)

# Interop: Redisson's own semaphore, permit-expirable semaphore and latch scripts (raw hiredis)
# against the same keys as rlock.
rlock_add_test(NAME test_sem_compat SOURCES semaphore/test_sem_compat.c LABELS redis TIMEOUT 60)

# The documented bounds: permits, deltas and latch counts beyond 2^31-1 are RLOCK_EINVAL and write
# nothing; the count on Redis may pass 2^31-1 through adds and releases (< 1 s).
rlock_add_test(NAME test_sem_bounds SOURCES semaphore/test_sem_bounds.c LABELS redis TIMEOUT 60)

# Lost replies (800 ms command timeout; CLIENT PAUSE + CLIENT KILL before a command runs, the
# server stopped while it is in flight): releases, leased releases and count-downs are resent and
# applied once; acquires are kept and reported, or cancelled on Redis, or (Redis out of reach for
# longer) given back by the handle's next call; a waiter cancelled after a lost reply is settled
# before RLOCK_ECANCELED (~16 s).
rlock_add_test(NAME test_sem_lost_reply SOURCES semaphore/test_sem_lost_reply.c LABELS redis fault
               TIMEOUT 90)

# Fault stress: 2 permits, 8 threads on 2 clients, connections killed every 20-100 ms and writes
# paused, plain permits then leased permits (4 s each, SEM_FAULT_MS): never more than 2 inside
# (independent checker), no acquire timed out, every permit back at the end (~9 s).
rlock_add_test(NAME test_sem_fault_stress SOURCES semaphore/test_sem_fault_stress.c
               LABELS redis fault stress TIMEOUT 120)

# Drain, set permits (total = available + leased, wakes a waiter), lease updates (a watchdog
# permit's renewals stop) and remaining leases, release-if-exists, totals, several leased permits
# per call, trySetPermits with a TTL, latch deletes; each with its bad input (~8 s).
rlock_add_test(NAME test_sem_ops SOURCES semaphore/test_sem_ops.c LABELS redis TIMEOUT 60)

# Cancellable waits (issue 29): a fired token ends a new call before any command; a cancel storm
# of 64 waiters on a semaphore, a leased semaphore and a latch (no permit lost or leaked, no
# waiter left subscribed, p99 cancel latency printed, <= 10 ms in plain for the best of up to 3
# storms); a cancel racing a release, 1,000 rounds (200 under sanitizers), checked against the
# test's own permit count (~7 s plain, up to ~16 s when a loaded box needs the extra storms).
rlock_add_test(NAME test_sem_cancel SOURCES semaphore/test_sem_cancel.c LABELS redis stress
               TIMEOUT 120)

# What semaphores, leased permits and the latch report (issue 31), exact after known work:
# rlock_acquire_total by result (timeouts, a token fired before and during the wait), the wait
# and hold histograms, the holds gauge (permits) and waiters gauge, a watched name, a lost
# watchdog permit, the event sequence of each (< 1 s).
rlock_add_test(NAME test_sem_metrics SOURCES semaphore/test_sem_metrics.c LABELS redis TIMEOUT 60)
