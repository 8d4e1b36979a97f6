# tests/cmake/rw.cmake - the read-write lock (issue 5). Paths are relative to tests/.
# Every program starts its own redis-server through the harness.

rlock_add_test(NAME test_rw_scenarios
               SOURCES rw/test_rw_scenarios.c rw/rw_util.c
               LABELS redis TIMEOUT 120)
