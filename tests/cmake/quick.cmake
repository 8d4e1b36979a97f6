# tests/cmake/quick.cmake - the quick tier (tests/run.sh --quick, docs/testing.md): the label
# `quick` on every unit test and on one real-Redis test per lock type, primitive and deployment,
# plus the Redisson-compat suite, about 70 s of tests on 2 cores. Chosen to judge by counts and
# checkers rather than tight time bounds, which a loaded box misses now and then (load 10 here:
# test_reentrant_basic's 100 ms expiry bound, test_redlock's 50 ms server timeouts,
# test_replica_stale's 300 ms WAIT, test_election's 50 ms observer bound, so the election is
# left to the full run), and to stay short under load (test_reentrant_stress took 7-13 s,
# test_fair_order 11 s).
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
  # single-key lock types
  test_reentrant_waiting test_reentrant_fencing test_fair_grant test_fair_scripts test_rw_wake
  test_spin
  test_multi test_redlock_stress         # groups
  test_sem_stress test_latch_procs       # primitives: semaphores (plain and leased), the latch
  test_tls test_sentinel_discovery test_cluster_routing test_cluster_replica_sync   # deployments
  test_redisson_compat                   # Redisson's protocol, byte for byte
  test_inspect test_cli_tls)             # rlock_inspect and the rlock command
# A test the build left out (the CLI's with RLOCK_BUILD_CLI=OFF) is left out of the tier too.
foreach(_t IN LISTS RLOCK_QUICK_TESTS)
  if(TEST ${_t})
    set_property(TEST ${_t} APPEND PROPERTY LABELS quick)
  endif()
endforeach()
