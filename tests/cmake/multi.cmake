# tests/cmake/multi.cmake - multi-lock and RedLock (issue 6). Paths are relative to tests/.
# Every program starts its own redis-server processes through the harness.

rlock_add_test(NAME test_multi
               SOURCES multi/test_multi.c multi/multi_util.c
               LABELS redis TIMEOUT 90)

rlock_add_test(NAME test_multi_stress
               SOURCES multi/test_multi_stress.c multi/multi_util.c
               LABELS redis stress TIMEOUT 120)

rlock_add_test(NAME test_redlock
               SOURCES multi/test_redlock.c multi/multi_util.c
               LABELS redis fault TIMEOUT 120)

rlock_add_test(NAME test_redlock_stress
               SOURCES multi/test_redlock_stress.c multi/multi_util.c
               LABELS redis stress fault TIMEOUT 150)
