# tests/cmake/owners.cmake - owners, cancellation tokens, rlock_extend and per-hold on_lost
# (issue 29) on every lock type and both groups. Included from tests/CMakeLists.txt.
if(TARGET rlock_harness)
  if(RLOCK_SANITIZE MATCHES "thread")
    set(_owners_args --no-fork)
  else()
    set(_owners_args "")
  endif()
  rlock_add_test(NAME test_owners SOURCES owners/test_owners.c owners/owners_util.c
                 LABELS redis TIMEOUT 120 ARGS ${_owners_args})
endif()
# The cancel storm (64 waiters on each of 7 subjects, p99 from firing to return <= 10 ms without
# a sanitizer; ~5 s) runs alone (SERIAL): its latency is the scheduler's under load. The race:
# 10,000 cancel-vs-grant rounds (1,000 under a sanitizer), each checked on Redis without the
# library, and a fired token that sends no command (~20 s plain).
if(TARGET rlock_harness)
  rlock_add_test(NAME test_cancel_storm SOURCES owners/test_cancel_locks.c owners/owners_util.c
                 LABELS "redis;stress" TIMEOUT 120 ARGS --storm SERIAL)
  rlock_add_test(NAME test_cancel_race SOURCES owners/test_cancel_locks.c owners/owners_util.c
                 LABELS "redis;stress" TIMEOUT 180 ARGS --race)
endif()
