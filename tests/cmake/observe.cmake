# tests/cmake/observe.cmake - observability (issue 31): metrics, per-name figures, the event
# hook. Paths are relative to tests/. The program starts its own redis-server.

rlock_add_test(NAME test_observe SOURCES observe/test_observe.c LABELS redis TIMEOUT 60
               ARGS ${CMAKE_CURRENT_SOURCE_DIR}/observe/parse_metrics.py)
