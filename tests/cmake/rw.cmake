# tests/cmake/rw.cmake - the read-write lock (issue 5). Paths are relative to tests/.
# Every program starts its own redis-server through the harness. test_rw_wake: a release wakes
# one waiting writer, a writer that gives up passes the wake-up on (issue 17).

rlock_add_tests_with(rw/rw_util.c
  test_rw_scenarios  "redis"        120
  test_rw_zombie     "redis fault"  90
  test_rw_starvation "redis stress" 90
  test_rw_stress     "redis stress" 120
  test_rw_wake       "redis"        60)
