# tests/cmake/quick.cmake - the quick tier (tests/run.sh --quick, docs/testing.md): the label
# `quick` on every unit test and on one real-Redis test per lock type, primitive and deployment,
# plus the Redisson-compat suite, about 80 s of tests on 2 cores. RedLock is represented by its
# stress test, which judges by its checker: test_redlock's 50 ms bounds miss on a loaded box.
# Included after every other fragment, so that no twin (the <test>_tls programs of tls.cmake
# copy their base's labels) inherits the label, and the tier stays one list.
get_property(_rlock_all_tests DIRECTORY PROPERTY TESTS)
foreach(_t IN LISTS _rlock_all_tests)
  get_test_property(${_t} LABELS _labels)
  if("unit" IN_LIST _labels)
    set_property(TEST ${_t} APPEND PROPERTY LABELS quick)
  endif()
endforeach()

set(RLOCK_QUICK_TESTS
  core_client core_armed                 # client, pool, scripts; the subscriber's armed hand-off
  test_reentrant_basic test_fair_order test_rw_wake test_spin   # single-key lock types
  test_multi test_redlock_stress test_election  # groups, and leader election over a fair lock
  test_sem_basic test_latch_procs        # primitives: semaphores, the latch
  test_tls test_sentinel_discovery test_cluster_routing test_replica_stale   # deployments
  test_redisson_compat                   # Redisson's protocol, byte for byte
  test_inspect test_cli_tls)             # rlock_inspect and the rlock command
# A test the build left out (the CLI's with RLOCK_BUILD_CLI=OFF) is left out of the tier too.
foreach(_t IN LISTS RLOCK_QUICK_TESTS)
  if(TEST ${_t})
    set_property(TEST ${_t} APPEND PROPERTY LABELS quick)
  endif()
endforeach()
