# tests/cmake/rw.cmake - the read-write lock (issue 5). Paths are relative to tests/.
# Every program starts its own redis-server through the harness. test_rw_wake: a release wakes
# one waiting writer, a writer that gives up passes the wake-up on (issue 17).
# test_rw_starvation is plain_only: what it asserts are 500 ms windows for 16 reader threads,
# which a sanitizer's slowdown only blurs; both preferences and waiting writers run under the
# sanitizers in test_rw_scenarios and test_rw_stress (CONTRIBUTING, "Test variants").

rlock_add_tests_with(rw/rw_util.c
  test_rw_scenarios  "redis"        120
  test_rw_zombie     "redis fault"  90
  test_rw_starvation "redis stress plain_only" 90
  test_rw_stress     "redis stress" 120
  test_rw_wake       "redis"        60)
