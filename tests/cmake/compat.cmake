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

# rlock_add_redisson_test(<name> <timeout> <sources...>): program <name>, run as ctest <name>
# against the first version and <name>_r<major> against each other one.
function(rlock_add_redisson_test NAME TIMEOUT)
  list(GET RLOCK_REDISSON_VERSIONS 0 _first)
  set(_jar "${RLOCK_REDISSON_JAR_DIR}/${_first}/redisson-peer-${_first}.jar")
  rlock_add_test(NAME ${NAME} SOURCES ${ARGN} compat/redisson_java.c
                 LABELS redis redisson plain_only TIMEOUT ${TIMEOUT}
                 ENV "RLOCK_REDISSON_JAR=${_jar}")
  get_test_property(${NAME} ENVIRONMENT _env)
  get_test_property(${NAME} TIMEOUT _timeout)
  foreach(_v IN LISTS RLOCK_REDISSON_VERSIONS)
    if(NOT _v STREQUAL _first)
      string(REGEX REPLACE "\\..*" "" _major "${_v}")
      set(_jar "${RLOCK_REDISSON_JAR_DIR}/${_v}/redisson-peer-${_v}.jar")
      list(TRANSFORM _env REPLACE "^RLOCK_REDISSON_JAR=.*" "RLOCK_REDISSON_JAR=${_jar}")
      add_test(NAME ${NAME}_r${_major} COMMAND ${NAME})
      set_tests_properties(${NAME}_r${_major} PROPERTIES TIMEOUT ${_timeout} SKIP_RETURN_CODE 77
                           ENVIRONMENT "${_env}" LABELS "redis;redisson;plain_only")
    endif()
  endforeach()
endfunction()

rlock_add_redisson_test(test_redisson_java_lock 240 compat/test_redisson_java_lock.c)
rlock_add_redisson_test(test_redisson_java_sync 120 compat/test_redisson_java_sync.c)
