# tests/cmake/rw.cmake - the read-write lock (issue 5). Paths are relative to tests/.
# Every program starts its own redis-server through the harness.

rlock_add_test(NAME test_rw_scenarios
               SOURCES rw/test_rw_scenarios.c rw/rw_util.c
               LABELS redis TIMEOUT 120)

rlock_add_test(NAME test_rw_zombie
               SOURCES rw/test_rw_zombie.c rw/rw_util.c
               LABELS redis fault TIMEOUT 90)

rlock_add_test(NAME test_rw_starvation
               SOURCES rw/test_rw_starvation.c rw/rw_util.c
               LABELS redis stress TIMEOUT 90)

rlock_add_test(NAME test_rw_stress
               SOURCES rw/test_rw_stress.c rw/rw_util.c
               LABELS redis stress TIMEOUT 120)

# A release wakes one waiting writer, a writer that gives up passes the wake-up on (issue 17).
rlock_add_test(NAME test_rw_wake
               SOURCES rw/test_rw_wake.c rw/rw_util.c
               LABELS redis TIMEOUT 60)
