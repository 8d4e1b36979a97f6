# tests/cmake/cli.cmake - the rlock command (cli/) and the library calls it added
# (rlock_inspect, rlock_client_interrupt). Paths are relative to tests/.
if(NOT TARGET rlock_cli_pure)
  return()
endif()

# DURATION parsing, signal names, JSON escaping.
rlock_add_test(NAME test_cli_pure SOURCES cli/test_cli_pure.c LABELS unit TIMEOUT 30
               LIBS rlock_cli_pure)
# rlock top's key classification: the name each scanned key stands for (src/locks/survey.c).
rlock_add_test(NAME test_survey_base SOURCES unit/test_survey_base.c LABELS unit TIMEOUT 30)

if(NOT TARGET rlock_harness)
  return()
endif()
# rlock_inspect on every lock type, rlock_client_interrupt leaving the fair queue.
rlock_add_test(NAME test_inspect SOURCES cli/test_inspect.c LABELS redis TIMEOUT 60)

# Acceptance of issue 15: the built `rlock` binary spawned against a real redis-server.
if(TARGET rlock_cli)
  rlock_add_test(NAME test_cli_accept SOURCES cli/test_cli_accept.c cli/cli_spawn.c LABELS redis
                 TIMEOUT 180 ARGS $<TARGET_FILE:rlock_cli>)
  add_dependencies(test_cli_accept rlock_cli)
  # Issue 26: no password in messages, one-line usage errors, the command's process group
  # signalled, --lease enforced, silent skips, waiters in status.
  rlock_add_test(NAME test_cli_hardening SOURCES cli/test_cli_hardening.c cli/cli_spawn.c
                 LABELS redis TIMEOUT 120 ARGS $<TARGET_FILE:rlock_cli>)
  add_dependencies(test_cli_hardening rlock_cli)
  # The --tls-* options and RLOCK_TLS_* variables against a TLS server that requires a client
  # certificate (the certificates of the tls_certs fixture, tests/cmake/tls.cmake).
  rlock_add_test(NAME test_cli_tls SOURCES cli/test_cli_tls.c cli/cli_spawn.c LABELS redis
                 TIMEOUT 60 ARGS $<TARGET_FILE:rlock_cli>
                 ENV "RLOCK_TLS_CERTS=${CMAKE_CURRENT_BINARY_DIR}/tls-certs"
                 FIXTURES_REQUIRED tls_certs)
  add_dependencies(test_cli_tls rlock_cli)
endif()

# Issue 32 recipes in rlock run: -k spin for a user without subscribe; --hold-at-least and
# --once-per with two hosts simulated by two rlock processes.
if(TARGET rlock_cli)
  rlock_add_test(NAME test_cli_recipes SOURCES cli/test_cli_recipes.c cli/cli_spawn.c
                 LABELS redis TIMEOUT 90 ARGS $<TARGET_FILE:rlock_cli>)
  add_dependencies(test_cli_recipes rlock_cli)
endif()

# Issue 31: rlock top and rlock_survey() on one of each kind of object, as a read-only ACL
# user, bad input, and the live view ended by q and SIGTERM on a pseudo-terminal.
if(TARGET rlock_cli)
  rlock_add_test(NAME test_cli_top SOURCES cli/test_cli_top.c cli/cli_spawn.c LABELS redis
                 TIMEOUT 60 ARGS $<TARGET_FILE:rlock_cli>)
  add_dependencies(test_cli_top rlock_cli)
endif()

# rlock top on a 3-master cluster (no replicas): every master scanned. Registered here, beside the
# other tests of the binary, though its source sits with the cluster suites.
if(TARGET rlock_cli)
  rlock_add_test(NAME test_cluster_top SOURCES cluster/test_cluster_top.c cli/cli_spawn.c
                 LABELS redis TIMEOUT 60 ARGS $<TARGET_FILE:rlock_cli>)
  add_dependencies(test_cluster_top rlock_cli)
endif()
