# tests/cmake/multi.cmake - multi-lock and RedLock (issue 6). Paths are relative to tests/.
# Every program starts its own redis-server processes through the harness.

rlock_add_tests_with(multi/multi_util.c
  test_multi          "redis"              90
  test_multi_stress   "redis stress"       120
  test_redlock        "redis fault"        120
  test_redlock_stress "redis stress fault" 150)
