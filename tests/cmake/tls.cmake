# tests/cmake/tls.cmake - TLS: throwaway certificates made once per ctest run (fixture
# tls_certs), the TLS acceptance tests, and scenario programs of other areas registered a second
# time with RH_TLS_DIR set, which makes their servers TLS servers and their clients rediss://.
# Included from tests/CMakeLists.txt; paths are relative to tests/.
set(RLOCK_TLS_CERT_DIR "${CMAKE_CURRENT_BINARY_DIR}/tls-certs")
add_test(NAME tls_certs
  COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/tls/make_certs.sh" "${RLOCK_TLS_CERT_DIR}")
set_tests_properties(tls_certs PROPERTIES FIXTURES_SETUP tls_certs LABELS "redis;fault;stress"
                     TIMEOUT 60)

if(TARGET rlock_harness)
  rlock_add_test(NAME test_tls SOURCES tls/test_tls.c LABELS redis fault TIMEOUT 120
                 ENV "RLOCK_TLS_CERTS=${RLOCK_TLS_CERT_DIR}" FIXTURES_REQUIRED tls_certs)
  rlock_add_test(NAME test_no_sigpipe SOURCES tls/test_no_sigpipe.c LABELS fault TIMEOUT 180
                 ENV "RLOCK_TLS_CERTS=${RLOCK_TLS_CERT_DIR}" FIXTURES_REQUIRED tls_certs)

  # <test>_tls: the same program as <test>, over TLS servers.
  function(rlock_add_tls_variant base)
    if(NOT TEST ${base})
      return()
    endif()
    get_test_property(${base} TIMEOUT _timeout)
    get_test_property(${base} LABELS _labels)
    add_test(NAME ${base}_tls COMMAND ${base})
    set_tests_properties(${base}_tls PROPERTIES
      TIMEOUT ${_timeout} LABELS "${_labels}" SKIP_RETURN_CODE 77 FIXTURES_REQUIRED tls_certs
      ENVIRONMENT "RH_TLS_DIR=${RLOCK_TLS_CERT_DIR}")
  endfunction()
  # Not test_redlock: its fault cases time a 50 ms per-server timeout, which a TLS dial of a
  # loaded machine exceeds (test_redlock_stress_tls runs RedLock over three TLS servers).
  foreach(_t test_reentrant_basic test_reentrant_stress test_fair_order test_fair_stress
             test_rw_scenarios test_multi test_redlock_stress core_subscriber core_armed)
    rlock_add_tls_variant(${_t})
  endforeach()
  # Semaphores (plain and leased permits, the stress, the watchdog's permits) and the latch.
  foreach(_t test_sem_basic test_sem_stress test_sem_fault test_latch_procs)
    rlock_add_tls_variant(${_t})
  endforeach()
  # plain_only: under ASan over TLS the latch's 250 ms bound for releasing the waiters of four
  # other processes is missed now and then on the loaded 2-core box (293 ms, once 1.3 s; the
  # build before TLS sockets became blocking took 58-378 ms there too), so it runs plain only.
  if(TEST test_latch_procs_tls)
    set_property(TEST test_latch_procs_tls APPEND PROPERTY LABELS plain_only)
  endif()
  # plain_only as well: the twins whose subject is a lock type's logic rather than the transport.
  # Their plain-TCP twins run that logic under ASan and TSan, and the transport under the
  # sanitizers is covered by test_tls, test_cluster_tls, core_subscriber_tls, core_armed_tls and
  # the reentrant twins (threads sharing TLS connections). About 70 s a sanitizer variant, which
  # tests/run.sh needs to stay within its 40 minutes.
  foreach(_t test_fair_order test_fair_stress test_rw_scenarios test_multi test_redlock_stress
             test_sem_basic test_sem_stress test_sem_fault)
    if(TEST ${_t}_tls)
      set_property(TEST ${_t}_tls APPEND PROPERTY LABELS plain_only)
    endif()
  endforeach()
  # long (run with RLOCK_LONG=1): the three slowest of those twins, about 40 s of the plain
  # variant (read-write scenarios 19 s, fair order 11 s, semaphore basics 9 s), which a whole
  # tests/run.sh needs to stay within 45 minutes. Their logic runs over plain TCP in every
  # variant; TLS under these lock types' traffic stays covered by test_fair_stress_tls,
  # test_sem_fault_tls, test_sem_stress_tls, test_multi_tls and test_redlock_stress_tls.
  foreach(_t test_rw_scenarios test_fair_order test_sem_basic)
    if(TEST ${_t}_tls)
      set_property(TEST ${_t}_tls APPEND PROPERTY LABELS long)
    endif()
  endforeach()
endif()

# The reply stream's guard against announced sizes hiredis would allocate up front (no server).
rlock_add_test(NAME test_resp_guard SOURCES tls/test_resp_guard.c LABELS unit TIMEOUT 60)

# Bounds of the connection layer: a host name whose DNS never answers costs connect_timeout_ms
# (own network/mount namespaces, skipped where not allowed); a reply announcing a huge array or
# bulk string is RLOCK_EPROTO before hiredis allocates it.
rlock_add_test(NAME test_conn_bounds SOURCES tls/test_conn_bounds.c LABELS fault TIMEOUT 60)
