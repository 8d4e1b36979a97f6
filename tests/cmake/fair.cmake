# tests/cmake/fair.cmake - the fair lock's tests (tests/fair/). Included from tests/CMakeLists.txt;
# paths are relative to tests/. Every program starts its own redis-server(s) via the harness.
if(NOT TARGET rlock_harness)
  return()
endif()

# Basic set, data layout, per-waiter notification, heartbeats (~10 s).
rlock_add_test(NAME test_fair_basic SOURCES fair/test_fair_basic.c LABELS redis TIMEOUT 90)
