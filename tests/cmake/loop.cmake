# tests/cmake/loop.cmake - loop clients (include/rlock_async.h, issue 30) through the libuv
# adapter against real redis-servers. The libuv side (tests/loop/loop_uv.c) is compiled as a
# user's code is, with the public headers only: the private include path has a semaphore.h of
# its own that would hide the system's from uv.h. Not built without libuv's development files.
# Included from tests/CMakeLists.txt.
pkg_check_modules(LIBUV QUIET IMPORTED_TARGET libuv)
if(TARGET rlock_harness AND LIBUV_FOUND)
  add_library(rlock_test_uv STATIC loop/loop_uv.c)
  target_include_directories(rlock_test_uv PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/loop"
                                                  "${PROJECT_SOURCE_DIR}/include")
  # The library after it on the link line, without its include path in this target's compile.
  target_link_libraries(rlock_test_uv PUBLIC PkgConfig::LIBUV INTERFACE rlock_internal)
  rlock_add_test(NAME test_loop_uv SOURCES loop/test_loop_uv.c LIBS rlock_test_uv
                 LABELS redis TIMEOUT 60)
elseif(TARGET rlock_harness)
  message(STATUS "rlock: libuv not found, test_loop_uv not built")
endif()
