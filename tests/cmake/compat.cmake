# Redisson compatibility: rlock against a raw client speaking Redisson's lock protocol.
rlock_add_test(NAME test_redisson_compat SOURCES compat/test_redisson_compat.c
               LABELS redis TIMEOUT 60)
rlock_add_test(NAME test_redisson_compat_cluster SOURCES compat/test_redisson_compat_cluster.c
               LABELS redis TIMEOUT 180)

# The released Redisson as a peer: the Java program of compat/java (built by tests/run.sh with
# Maven into compat/java/target/<version>/) driven by these tests, once per pinned Redisson
# version. Without java or the jar they skip. Label `redisson`; plain variant only.
set(RLOCK_REDISSON_JAR_DIR "${CMAKE_CURRENT_SOURCE_DIR}/compat/java/target" CACHE PATH
    "Where tests/compat/java's Maven build leaves redisson-peer-<version>.jar")
set(RLOCK_REDISSON_VERSIONS 4.7.0 3.52.0)

# rlock_add_redisson_test(NAME <name> TIMEOUT <s> SOURCES <files...> [LIBS <libs...>] [TLS]
# [FIRST_ONLY] [OTHERS_TLS] [TLS_ALL] [OTHERS_LONG]): program <name> (linked with LIBS too), run as ctest <name> against the first
# version and, unless FIRST_ONLY, <name>_r<major> against each other one; with TLS also
# <name>_tls (first version) over TLS servers, as tls.cmake's twins (RH_TLS_DIR); with TLS_ALL
# each other version also over TLS as <name>_tls_r<major>; with OTHERS_TLS the other versions run
# over TLS only; with OTHERS_LONG the other versions' tests carry the label `long`, which
# tests/run.sh runs only with RLOCK_LONG=1 (CI's time; CONTRIBUTING, "Test variants").
function(rlock_add_redisson_test)
  cmake_parse_arguments(R "TLS;FIRST_ONLY;OTHERS_TLS;TLS_ALL;OTHERS_LONG" "NAME;TIMEOUT"
                        "SOURCES;LIBS" ${ARGN})
  set(_other_labels "redis;redisson;plain_only")
  if(R_OTHERS_LONG)
    set(_other_labels "redis;redisson;plain_only;long")
  endif()
  list(GET RLOCK_REDISSON_VERSIONS 0 _first)
  set(_jar "${RLOCK_REDISSON_JAR_DIR}/${_first}/redisson-peer-${_first}.jar")
  rlock_add_test(NAME ${R_NAME} SOURCES ${R_SOURCES} compat/redisson_java.c LIBS ${R_LIBS}
                 LABELS redis redisson plain_only TIMEOUT ${R_TIMEOUT}
                 ENV "RLOCK_REDISSON_JAR=${_jar}")
  get_test_property(${R_NAME} ENVIRONMENT _env)
  get_test_property(${R_NAME} TIMEOUT _timeout)
  set(_props TIMEOUT ${_timeout} SKIP_RETURN_CODE 77)
  if(R_TLS)
    # The certificates of tls.cmake's fixture (the same directory: that fragment comes later).
    add_test(NAME ${R_NAME}_tls COMMAND ${R_NAME})
    set_tests_properties(${R_NAME}_tls PROPERTIES ${_props} FIXTURES_REQUIRED tls_certs
      LABELS "redis;redisson;plain_only"
      ENVIRONMENT "${_env};RH_TLS_DIR=${CMAKE_CURRENT_BINARY_DIR}/tls-certs")
  endif()
  foreach(_v IN LISTS RLOCK_REDISSON_VERSIONS)
    if(NOT _v STREQUAL _first AND NOT R_FIRST_ONLY)
      string(REGEX REPLACE "\\..*" "" _major "${_v}")
      set(_jar "${RLOCK_REDISSON_JAR_DIR}/${_v}/redisson-peer-${_v}.jar")
      set(_venv ${_env})
      list(TRANSFORM _venv REPLACE "^RLOCK_REDISSON_JAR=.*" "RLOCK_REDISSON_JAR=${_jar}")
      if(R_OTHERS_TLS OR R_TLS_ALL)
        add_test(NAME ${R_NAME}_tls_r${_major} COMMAND ${R_NAME})
        set_tests_properties(${R_NAME}_tls_r${_major} PROPERTIES ${_props}
          FIXTURES_REQUIRED tls_certs LABELS "${_other_labels}"
          ENVIRONMENT "${_venv};RH_TLS_DIR=${CMAKE_CURRENT_BINARY_DIR}/tls-certs")
      endif()
      if(NOT R_OTHERS_TLS)
        add_test(NAME ${R_NAME}_r${_major} COMMAND ${R_NAME})
        set_tests_properties(${R_NAME}_r${_major} PROPERTIES ${_props} ENVIRONMENT "${_venv}"
                             LABELS "${_other_labels}")
      endif()
    endif()
  endforeach()
endfunction()

rlock_add_redisson_test(NAME test_redisson_java_lock TIMEOUT 240 TLS
                        SOURCES compat/test_redisson_java_lock.c compat/redisson_java_cases.c)
# The semaphores and latch over TLS with both versions (a run takes ~5 s).
rlock_add_redisson_test(NAME test_redisson_java_sync TIMEOUT 120 TLS TLS_ALL
                        SOURCES compat/test_redisson_java_sync.c)
rlock_add_redisson_test(NAME test_redisson_java_cluster TIMEOUT 180 OTHERS_LONG
                        SOURCES compat/test_redisson_java_cluster.c compat/redisson_java_cases.c)
# A Sentinel run takes ~40 s: Redisson 4.x on plain servers, 3.x over TLS (label `long`: 3.x's
# TLS runs in CI are test_redisson_java_sync_tls_r3's).
rlock_add_redisson_test(NAME test_redisson_java_sentinel TIMEOUT 180 OTHERS_TLS OTHERS_LONG
                        SOURCES compat/test_redisson_java_sentinel.c compat/redisson_java_cases.c)
# Drain, set permits, lease updates and remaining leases, release-if-exists, totals, several
# leased permits per call, trySetPermits with a TTL, latch deletes: each side reads what the
# other wrote (~4 s per version).
rlock_add_redisson_test(NAME test_redisson_java_sem_ops TIMEOUT 120
                        SOURCES compat/test_redisson_java_sem_ops.c)

# Two ways of losing a mixed fair queue's order, measured: a killed Redisson waiter (a second JVM
# with a 3 s fairLockWaitTimeout) and a Redisson JVM whose wall clock is shifted by libfaketime.
rlock_add_redisson_test(NAME test_redisson_java_fair TIMEOUT 60 OTHERS_LONG
                        SOURCES compat/test_redisson_java_fair.c compat/redisson_java_cases.c)
