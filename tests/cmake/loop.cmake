# tests/cmake/loop.cmake - loop clients (include/rlock_async.h, issue 30) against real
# redis-servers, each program once per adapter (_uv: rlock/libuv.h, _event: rlock/libevent.h; the
# loop itself in loop/loop_uv.c, loop/loop_event.c): test_loop_* the reentrant lock
# (loop/test_loop.c), test_loop_net_* TLS, host names and the back-off (loop/test_loop_net.c),
# test_loop_sync_* semaphores and the latch, test_loop_wake_* a wake-up during an attempt,
# test_loop_fair_* the fair lock, test_loop_rw_* the read-write and spin locks, test_loop_group_*
# the groups, test_loop_cancel_* a cancellation storm, test_loop_sentinel_* a Sentinel deployment with one failover.
# The functional programs also compile loop/tl_common.c, the helpers they share (tl_common.h).
# The loop side is compiled as a user's code is, with the public headers only: the private
# include path has a semaphore.h of its own that would hide the system's from uv.h. A program is
# not built without its loop library's development files. Included from tests/CMakeLists.txt.
pkg_check_modules(LIBUV QUIET IMPORTED_TARGET libuv)
pkg_check_modules(LIBEVENT QUIET IMPORTED_TARGET libevent)
if(TARGET rlock_harness)
  foreach(_adapter uv event)
    if(_adapter STREQUAL "uv")
      set(_found ${LIBUV_FOUND})
      set(_lib PkgConfig::LIBUV)
    else()
      set(_found ${LIBEVENT_FOUND})
      set(_lib PkgConfig::LIBEVENT)
    endif()
    if(NOT _found)
      message(STATUS "rlock: lib${_adapter} not found, test_loop_${_adapter} not built")
      continue()
    endif()
    add_library(rlock_test_${_adapter} STATIC loop/loop_${_adapter}.c)
    target_include_directories(rlock_test_${_adapter} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}/loop"
                                                             "${PROJECT_SOURCE_DIR}/include")
    # The library after it on the link line, without its include path in this target's compile.
    target_link_libraries(rlock_test_${_adapter} PUBLIC ${_lib} INTERFACE rlock_internal)
    rlock_add_test(NAME test_loop_${_adapter} SOURCES loop/test_loop.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # TLS, host names and the data connection's back-off (loop/test_loop_net.c).
    rlock_add_test(NAME test_loop_net_${_adapter} SOURCES loop/test_loop_net.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60
                   ENV "RLOCK_TLS_CERTS=${CMAKE_CURRENT_BINARY_DIR}/tls-certs"
                   FIXTURES_REQUIRED tls_certs)
    # Semaphores and the latch on a loop client (loop/test_loop_sync.c).
    rlock_add_test(NAME test_loop_sync_${_adapter} SOURCES loop/test_loop_sync.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # The other semaphore and latch calls, watchdog-renewed leased permits and a hold's own
    # on_lost (loop/test_loop_semx.c).
    rlock_add_test(NAME test_loop_semx_${_adapter} SOURCES loop/test_loop_semx.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # test_loop_wake_*: a wake-up while an attempt is on its way, and direct grants between loop
    # and threaded reentrant waiters and holders (loop/test_loop_wake.c, ~2.7 s).
    rlock_add_test(NAME test_loop_wake_${_adapter} SOURCES loop/test_loop_wake.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 30)
    # The fair lock on loop clients: FIFO with a threaded waiter, give-ups that leave the queue.
    rlock_add_test(NAME test_loop_fair_${_adapter} SOURCES loop/test_loop_fair.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # Multi-lock and RedLock groups on loop clients (loop/test_loop_group.c, three servers for
    # RedLock, ~5.5 s a program in each variant).
    rlock_add_test(NAME test_loop_group_${_adapter} SOURCES loop/test_loop_group.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # A cancellation storm: 160 waiters of four kinds, their tokens fired from a thread while
    # the holds go (loop/test_loop_cancel.c, about 1 s).
    rlock_add_test(NAME test_loop_cancel_${_adapter} SOURCES loop/test_loop_cancel.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis stress TIMEOUT 60)
    # The read-write and spin locks on loop clients, with a threaded client's handles on the same
    # names (loop/test_loop_rw.c).
    rlock_add_test(NAME test_loop_rw_${_adapter} SOURCES loop/test_loop_rw.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis TIMEOUT 60)
    # test_loop_stress_*: two processes x 200 owners on 10 names, reentrant then fair, under a
    # shared-memory checker (loop/test_loop_stress.c); RLOCK_LOOP_STRESS_MS is the reentrant
    # run's length, shorter under a sanitizer.
    if(RLOCK_SANITIZE)
      set(_stress_ms 1000)
    else()
      set(_stress_ms 2000)
    endif()
    rlock_add_test(NAME test_loop_stress_${_adapter} SOURCES loop/test_loop_stress.c
                   LIBS rlock_test_${_adapter} LABELS redis stress TIMEOUT 120
                   ENV "RLOCK_LOOP_STRESS_MS=${_stress_ms}")
    # test_loop_replica_uv: replica-synced grants on a loop client, a master with one replica
    # (loop/test_loop_replica.c, libuv only).
    if(_adapter STREQUAL "uv")
      rlock_add_test(NAME test_loop_replica_uv SOURCES loop/test_loop_replica.c loop/tl_common.c
                     LIBS rlock_test_uv LABELS redis fault TIMEOUT 60)
    endif()
    # test_loop_redisson_uv: a loop client and the released Redisson (compat.cmake's peer, first
    # version only) on one reentrant lock: exclusion under the peer's checker, wake-ups both ways.
    if(_adapter STREQUAL "uv" AND COMMAND rlock_add_redisson_test)
      rlock_add_redisson_test(NAME test_loop_redisson_uv TIMEOUT 120 FIRST_ONLY
                              SOURCES loop/test_loop_redisson.c LIBS rlock_test_uv)
    endif()
    # A Redis Cluster of three masters: locks on each, a fair waiter woken across nodes, a slot
    # migrated under a loop hold and waiter, in classic and in sharded pub/sub (auto on Redis 7),
    # a call without a reachable seed (loop/test_loop_cluster.c).
    # The libevent twin runs in plain only (~8 s a variant): the cluster code is the same under
    # both adapters, and the uv twin runs it under ASan and TSan.
    if(_adapter STREQUAL "uv")
      set(_cluster_labels redis)
    else()
      set(_cluster_labels redis plain_only)
    endif()
    rlock_add_test(NAME test_loop_cluster_${_adapter} SOURCES loop/test_loop_cluster.c
                   loop/tl_common.c LIBS rlock_test_${_adapter} LABELS ${_cluster_labels} TIMEOUT 60)
    # Sentinel: discovery, and one SENTINEL FAILOVER under a loop waiter and a loop hold
    # (loop/test_loop_sentinel.c). Slow (a deployment, a failover); its loop logic runs under
    # the sanitizers in the programs above, so it runs in plain only.
    rlock_add_test(NAME test_loop_sentinel_${_adapter} SOURCES loop/test_loop_sentinel.c loop/tl_common.c
                   LIBS rlock_test_${_adapter} LABELS redis fault plain_only TIMEOUT 180)
    # The libevent twin carries the label long (CI time: the failover logic is the adapters'
    # common code, and test_loop_sentinel_uv runs it in every CI run).
    if(_adapter STREQUAL "event")
      set_property(TEST test_loop_sentinel_event APPEND PROPERTY LABELS long)
    endif()
    # Its twin over TLS everywhere (rediss-sentinel://), libuv only, with the label long: it runs
    # with RLOCK_LONG=1 only (about 28 s).
    if(_adapter STREQUAL "uv" AND COMMAND rlock_add_tls_variant)
      rlock_add_tls_variant(test_loop_sentinel_uv)
      if(TEST test_loop_sentinel_uv_tls)
        set_property(TEST test_loop_sentinel_uv_tls APPEND PROPERTY LABELS long)
      endif()
    endif()
  endforeach()
endif()

# examples/uv_server_demo.sh on the built examples/uv_server: two server processes on one
# throwaway redis-server, 50 connections x 20 requests over 5 keys, every counter exact and both
# servers exiting cleanly (a sanitizer build checks their memory). Needs python3 (77: skipped).
if(RLOCK_BUILD_EXAMPLES AND LIBUV_FOUND AND TARGET rlock_harness)
  add_test(NAME test_uv_server_demo
           COMMAND bash "${PROJECT_SOURCE_DIR}/examples/uv_server_demo.sh"
                   --server "$<TARGET_FILE:example_uv_server>")
  math(EXPR _uv_demo_timeout "60 * ${RLOCK_TEST_TIMEOUT_MULTIPLIER}")
  set_tests_properties(test_uv_server_demo PROPERTIES LABELS redis TIMEOUT ${_uv_demo_timeout}
                       SKIP_RETURN_CODE 77)
endif()
