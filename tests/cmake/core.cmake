# tests/cmake/core.cmake - build-system level checks and core unit tests.
# Included from tests/CMakeLists.txt; paths are relative to tests/.

# (a) lua_syntax: every lua/*.lua, expanded, parses as Lua 5.1 (the dialect Redis runs).
find_program(RLOCK_LUAC_EXECUTABLE NAMES luac5.1 luac)
if(RLOCK_LUA_FILES)
  if(RLOCK_LUAC_EXECUTABLE)
    # The expanded scripts (what Redis runs, snippets spliced in) and the snippets alone.
    add_test(NAME lua_syntax COMMAND "${RLOCK_LUAC_EXECUTABLE}" -p ${RLOCK_LUA_EXPANDED}
                                     ${RLOCK_LUA_SNIPPETS})
  else()
    add_test(NAME lua_syntax COMMAND sh -c "echo 'luac5.1 not found: skipped'; exit 77")
  endif()
  set_tests_properties(lua_syntax PROPERTIES LABELS unit TIMEOUT 30 SKIP_RETURN_CODE 77)
endif()

# (b) exported_symbols: the shared library exports exactly the public API.
if(BUILD_SHARED_LIBS)
  add_test(NAME exported_symbols
    COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/check_exports.sh"
            $<TARGET_FILE:rlock> "${CMAKE_CURRENT_SOURCE_DIR}/exported_symbols.txt")
  set_tests_properties(exported_symbols PROPERTIES LABELS unit TIMEOUT 30 SKIP_RETURN_CODE 77)
endif()

# (b2) cmake_missing_source: a source listed in RLOCK_SOURCE_LIST but missing stops the configure
# step (a copy of the tree without src/locks/inspect.c, ~3 s; it builds nothing, so sanitizers add
# nothing: plain_only).
add_test(NAME cmake_missing_source
  COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/check_cmake_sources.sh" "${CMAKE_COMMAND}"
          "${PROJECT_SOURCE_DIR}")
set_tests_properties(cmake_missing_source PROPERTIES LABELS "unit;plain_only" TIMEOUT 60)

# (c) install_consumer: install this build into a temporary prefix, then build
# and run tests/consumer/ against it with find_package(rlock) and with
# pkg-config. Not meaningful in sanitizer builds (the consumer is not
# sanitized): run.sh excludes label `install` there.
if(RLOCK_INSTALL)
  if(BUILD_SHARED_LIBS)
    set(_rlock_shared 1)
  else()
    set(_rlock_shared 0)
  endif()
  add_test(NAME install_consumer
    COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer_test.sh"
            "${CMAKE_COMMAND}" "${PROJECT_BINARY_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/consumer"
            "${CMAKE_C_COMPILER}" ${_rlock_shared} "$<CONFIG>")
  set_tests_properties(install_consumer PROPERTIES LABELS "unit;install" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()

# (c2) first_hour: a new user's first hour as README.md leads it. A build with cmocka hidden from
# pkg-config configures (tests off, with a notice), builds and installs into a temporary prefix;
# README's first example, compiled by README's own cc line, runs from that prefix against the
# server REDIS_URL names; every example reaches its server through REDIS_URL alone;
# examples/redlock3.sh prints its counter. Label install: plain build only (~30 s).
# docs_first_hour: what README.md, docs/ and include/rlock.h owe that user (one ACL list, the
# test run's length and subsets, a usage line per example, the documented bounds of permits and
# latch counts): tests/consumer/check_docs.sh.
add_test(NAME docs_first_hour
  COMMAND sh "${CMAKE_CURRENT_SOURCE_DIR}/consumer/check_docs.sh" "${PROJECT_SOURCE_DIR}")
set_tests_properties(docs_first_hour PROPERTIES LABELS unit TIMEOUT 30)
if(RLOCK_INSTALL AND BUILD_SHARED_LIBS AND RLOCK_BUILD_EXAMPLES AND TARGET rlock_harness)
  rlock_add_test(NAME first_hour SOURCES consumer/test_first_hour.c LABELS redis install
                 TIMEOUT 300
                 ARGS "${PROJECT_SOURCE_DIR}" "${CMAKE_COMMAND}" "${PROJECT_BINARY_DIR}/examples")
endif()

# Core unit tests (no server needed). Registered here while their owners have
# not claimed them in another fragment.
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/unit/test_timer_wheel.c")
  rlock_add_test(NAME test_timer_wheel SOURCES unit/test_timer_wheel.c LABELS unit TIMEOUT 60)
endif()
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/unit/test_url.c")
  rlock_add_test(NAME test_url SOURCES unit/test_url.c LABELS unit TIMEOUT 60)
  rlock_add_test(NAME test_url_secrets SOURCES unit/test_url_secrets.c LABELS unit TIMEOUT 60)
endif()
rlock_add_test(NAME test_fmt SOURCES unit/test_fmt.c LABELS unit TIMEOUT 60)
# Cancellation tokens (src/cancel.c): wake-ups, signal handler, fork child (not under TSan).
if(RLOCK_SANITIZE MATCHES "thread")
  rlock_add_test(NAME test_cancel SOURCES unit/test_cancel.c LABELS unit TIMEOUT 60 ARGS --no-fork)
else()
  rlock_add_test(NAME test_cancel SOURCES unit/test_cancel.c LABELS unit TIMEOUT 60)
endif()
# The public header: error codes and log levels as enums and macros, the numeric version.
rlock_add_test(NAME test_header SOURCES unit/test_header.c LABELS unit TIMEOUT 30)

# rlock_client_new() refuses a server too old for the scripts (RLOCK_ENOTSUP naming it) and accepts
# Redis 7.0 and Valkey: a fake server thread in the test plays each version (no redis-server).
rlock_add_test(NAME core_server_version SOURCES core/test_server_version.c LABELS unit TIMEOUT 60)

# Harness self-test: starts real redis-server processes.
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/harness/test_harness.c")
  rlock_add_test(NAME test_harness SOURCES harness/test_harness.c LABELS redis TIMEOUT 120)
endif()

# Core acceptance tests against real redis-server processes (tests/core/).
if(TARGET rlock_harness)
  rlock_add_test(NAME core_client SOURCES core/test_client.c LABELS redis fault TIMEOUT 60)
  rlock_add_test(NAME core_pool SOURCES core/test_pool.c LABELS redis fault TIMEOUT 90)
  rlock_add_test(NAME core_scripts SOURCES core/test_scripts.c LABELS redis fault TIMEOUT 60
                 ARGS "${RLOCK_GENERATED_DIR}/lua")
  rlock_add_test(NAME core_errors SOURCES core/test_errors.c LABELS redis fault TIMEOUT 60)
  # The commands each kind's uncontended lock+unlock pair runs on Redis, counted (~0.3 s).
  rlock_add_test(NAME core_uncontended_cost SOURCES core/test_uncontended_cost.c LABELS redis
                 TIMEOUT 60)
  rlock_add_test(NAME core_oom SOURCES core/test_oom.c LABELS redis fault TIMEOUT 60)
  rlock_add_test(NAME core_acl_nopublish SOURCES core/test_acl_nopublish.c LABELS redis TIMEOUT 60)
  rlock_add_test(NAME core_subscriber SOURCES core/test_subscriber.c LABELS redis fault
                 TIMEOUT 60)
  # Armed attempts: one attempt per hand-off, NOSCRIPT re-attempt, no idle connection, fair order.
  rlock_add_test(NAME core_armed SOURCES core/test_armed.c LABELS redis fault TIMEOUT 60)
  # Failed subscriptions: refused by an ACL (RLOCK_EREDIS at once), unconfirmed in time (ECONN).
  rlock_add_test(NAME core_subscribe_errors SOURCES core/test_subscribe_errors.c
                 LABELS redis fault TIMEOUT 60)
endif()

# Observability (issue 31): examples/metrics_http serves /metrics over HTTP on a free loopback
# port; every family is there and rlock_acquire_total counts what the example did (~0.1 s).
# Client-wide counters, exact after known work: commands sent (against the server's own count),
# reconnects after CLIENT KILL of the pooled and the subscriber connection, pub/sub messages,
# watchdog renewals ok and failed; a waiter woken by hand, whose armed attempt its subscriber
# thread writes, counts with its holder what the server ran for both (~0.7 s).
if(TARGET rlock_harness)
  if(RLOCK_BUILD_EXAMPLES)
    rlock_add_test(NAME core_metrics_example SOURCES core/test_metrics_example.c LABELS redis
                   TIMEOUT 60 ARGS "$<TARGET_FILE:example_metrics_http>")
  endif()
  rlock_add_test(NAME core_metrics_counters SOURCES core/test_metrics_counters.c
                 LABELS redis fault TIMEOUT 60)
endif()

# The call graph between src files (read from the library's objects with nm) has no cycle except
# the defended ones in tests/deps_allowed.txt (docs/architecture.md, section 1).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME src_deps
           COMMAND "${Python3_EXECUTABLE}" "${CMAKE_CURRENT_SOURCE_DIR}/check_deps.py"
                   "${PROJECT_BINARY_DIR}/CMakeFiles/rlock_obj.dir/src"
                   "${CMAKE_CURRENT_SOURCE_DIR}/deps_allowed.txt")
  set_tests_properties(src_deps PROPERTIES LABELS unit TIMEOUT 60)
  # Includes point down the layers (src/README.md): a file includes headers of its own folder and
  # of the folders below it, never above or beside; cli/ sits on top. src_includes_backedge runs
  # the same check on a fixture tree with one back edge and one side edge, which it must name.
  set(_rlock_layers src/base src/transport src/topology src/notify src/client "src/sync|src/locks"
                    src/loop cli)
  add_test(NAME src_includes
           COMMAND "${Python3_EXECUTABLE}" "${CMAKE_CURRENT_SOURCE_DIR}/check_includes.py"
                   "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/deps_allowed.txt"
                   ${_rlock_layers})
  set_tests_properties(src_includes PROPERTIES LABELS unit TIMEOUT 30)
  add_test(NAME src_includes_backedge
           COMMAND "${Python3_EXECUTABLE}" "${CMAKE_CURRENT_SOURCE_DIR}/check_includes.py"
                   "${CMAKE_CURRENT_SOURCE_DIR}/deps_fixture"
                   "${CMAKE_CURRENT_SOURCE_DIR}/deps_fixture/allowed.txt" low mid "a|b")
  set_tests_properties(src_includes_backedge PROPERTIES LABELS unit TIMEOUT 30
    PASS_REGULAR_EXPRESSION
    "back edge: low/low.c -> mid.h .*back edge: a/side.c -> other.h .*defended back edge: b/other.h -> side_api.h .*includes: 4 passed, 2 failed")
  # README.md as the front door (at most 250 lines, the two commands first) and every relative
  # link of README.md and docs/*.md resolving to a file and heading.
  add_test(NAME docs_links COMMAND "${Python3_EXECUTABLE}"
                                   "${CMAKE_CURRENT_SOURCE_DIR}/check_doc_links.py" "${PROJECT_SOURCE_DIR}")
  set_tests_properties(docs_links PROPERTIES LABELS unit TIMEOUT 30)
endif()

# A client used on both sides of fork(): no re-entry of the parent's holds, no cross-talk, the
# child's own subscriber and watchdog, free in the child, a parent+child stress, a grandchild.
# Under TSan only the case whose child starts no thread runs: TSan cannot follow a child of a
# multi-threaded fork() that starts threads (by default it kills it; with die_after_fork=0 it
# aborts with "dup thread with used id" when glibc hands a new thread a dead parent thread's
# stack), and every other case has the child start the client's subscriber and watchdog.
if(TARGET rlock_harness)
  if(RLOCK_SANITIZE MATCHES "thread")
    rlock_add_test(NAME core_fork SOURCES core/test_fork.c LABELS redis fault TIMEOUT 120
                   ARGS --parent-only)
  else()
    rlock_add_test(NAME core_fork SOURCES core/test_fork.c LABELS redis fault TIMEOUT 120)
  endif()
endif()

# A re-entry never shortens a hold: watchdog hold + short re-entry, explicit longer/shorter leases.
if(TARGET rlock_harness)
  rlock_add_test(NAME core_reentry_lease SOURCES core/test_reentry_lease.c LABELS redis TIMEOUT 60)
endif()

# The minimal ACL rule set (docs/acl.md): every lock type's basic scenario as exactly that user.
if(TARGET rlock_harness)
  rlock_add_test(NAME core_acl_minimal SOURCES core/test_acl_minimal.c LABELS redis TIMEOUT 120)
endif()

# An unlock whose outcome is unknown (CLIENT PAUSE: the release never runs; SIGSTOP: it runs after
# the client gave up): a retry or the thread's next lock settles the hold record against Redis,
# so no ghost hold is re-entered or kept alive and no hold is released twice. Every kind.
if(TARGET rlock_harness)
  rlock_add_test(NAME core_unknown_release SOURCES core/test_unknown_release.c
                 LABELS redis fault TIMEOUT 90)
endif()

# rlock's RESP request writer against hiredis' redisFormatCommandArgv(), byte for byte.
rlock_add_test(NAME test_resp_format SOURCES unit/test_resp_format.c LABELS unit TIMEOUT 60)

# The Sentinel reply parsers threaded and loop clients share (sentinel.h, sentinel_watch.h).
rlock_add_test(NAME test_sentinel_parse SOURCES unit/test_sentinel_parse.c LABELS unit TIMEOUT 60)

# The slot of a loop client's script request (src/loop/loop_route.c), a part of Cluster on loop
# clients.
rlock_add_test(NAME test_loop_route SOURCES unit/test_loop_route.c LABELS unit TIMEOUT 60)

# Waiters that give up while Redis does not answer (issue 26): reentrant, fair and write waiters
# under CLIENT PAUSE WRITE and under SIGSTOP of the server from shortly before their wait ends
# return within wait_ms + command_timeout_ms; the queue entries they could not remove cost another
# client at most waiter_timeout_ms. ~14 s.
rlock_add_test(NAME core_giveup_paused SOURCES core/test_giveup_paused.c
               LABELS redis fault TIMEOUT 90)

# A waiter whose give-up could not reach Redis (issue 26): a release grants the lock to the
# departed wait; the thread's next lock takes one hold, not a re-entry, and its unlock frees the
# lock. Reentrant and fair. ~5 s.
rlock_add_test(NAME core_leave_lost SOURCES core/test_leave_lost.c LABELS redis fault TIMEOUT 60)

# A hold the watchdog judged lost that still stands on Redis (renewals paused for a lease, the key
# kept): the thread's next lock, after an RLOCK_ELOST unlock or without one, gives it back and
# takes the lock from free (larger token, one hold). Reentrant and fair. ~6 s.
rlock_add_test(NAME core_lost_still_held SOURCES core/test_lost_still_held.c
               LABELS redis fault TIMEOUT 60)

# Mutual exclusion under connection faults (issue 26): every lock type with its connections
# killed every 20-100 ms, CLIENT PAUSE and a stopped server; two independent checkers.
if(TARGET rlock_harness)
  rlock_add_test(NAME core_fault_exclusion SOURCES core/test_fault_exclusion.c
                 LABELS redis fault stress TIMEOUT 300)
endif()
