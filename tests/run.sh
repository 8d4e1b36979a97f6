#!/usr/bin/env bash
# tests/run.sh - the one test command.
#
# Installs what is missing (Debian 12, as root), then for each variant
# configures, builds and runs ctest:
#   plain  RelWithDebInfo; all tests; then the unit tests again under valgrind
#          (ctest label `memcheck`: valgrind twins of every `unit` test)
#   asan   RLOCK_SANITIZE=address,undefined; all tests except labels `install`, `plain_only`
#   tsan   RLOCK_SANITIZE=thread;            all tests except `install`, `plain_only`, `no_tsan`
#          (CONTRIBUTING, "Test variants", says which tests carry those labels and why)
# in build/<variant>, all with -DRLOCK_WERROR=ON and examples ON.
# Unit tests run with ctest -j2, the others serially. Before the variants, tests/lint.sh
# checks clang-format and clang-tidy (clang 14) over every C file; a violation fails the run.
#
# Environment:
#   RLOCK_VARIANTS="plain asan tsan"   variants to run, in order
#   RLOCK_SKIP_APT=1                   never call apt-get
#   RLOCK_JOBS=2                       parallel build / unit-test jobs
#   RLOCK_CTEST_ARGS="..."             extra arguments for every ctest call (e.g. -R url)
#   RLOCK_FUZZ_SECONDS=12              run time of each libFuzzer target (tests/fuzz), after the
#                                      variants, built with clang in build/fuzz; 0 skips fuzzing
#   RLOCK_SKIP_LINT=1                  skip the clang-format / clang-tidy step
#   RLOCK_LONG=1                       also run the tests labelled `long` (Redisson 3.x on Cluster,
#                                      Sentinel and the fair-queue measurements, three TLS twins
#                                      of lock-logic programs; ~150 s)
#   RLOCK_SKIP_JAVA=1                  skip the Maven build of the Redisson peer (the tests
#                                      labelled `redisson` then skip)
#   RLOCK_VALKEY=1                     the valkey step (after the plain variant, when it ran): a set of
#                                      the Redis-facing tests (RLOCK_VALKEY_TESTS, a ctest -R regex)
#                                      from build/plain again, on valkey-server; 0 skips it
#
# tests/run.sh --quick: the tier to run before every commit, about 2 minutes: tests/lint.sh
# --changed (clang-format everywhere, clang-tidy on what the branch changed), then the plain
# build only, its tests labelled `quick` (the unit tests in parallel, then one real-Redis test
# per lock type, primitive and deployment and the Redisson-compat suite, serially); no
# packages, Java, Valkey, sanitizers, valgrind or fuzzing. docs/testing.md lists the tiers.
#
# Keeps going after a failure; the last line of output is exactly
# "N passed, N failed" (tests counted from ctest's summaries; a failed
# configure or build counts as one failure). Exit status 0 only if nothing failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0
case "${1:-}" in
    --quick) QUICK=1 ;;
    "") ;;
    *) echo "usage: tests/run.sh [--quick]" >&2; exit 2 ;;
esac
VARIANTS=${RLOCK_VARIANTS:-plain asan tsan}
JOBS=${RLOCK_JOBS:-2}
# shellcheck disable=SC2206 # word splitting intended
EXTRA_CTEST_ARGS=(${RLOCK_CTEST_ARGS:-})
# Tests labelled `long` (the Redisson 3.x twins of the Cluster, Sentinel and fair-queue programs)
# run only with RLOCK_LONG=1, to keep a whole run within 45 minutes on 2 cores.
LONG_EXCLUDE='|long'
[ "${RLOCK_LONG:-0}" = 1 ] && LONG_EXCLUDE=''

log() { printf '\n=== %s\n' "$*"; }

# ---------------------------------------------------------------------------
# 1. Packages (not in the quick tier, which runs on a prepared machine).
# ---------------------------------------------------------------------------
[ "$QUICK" = 1 ] && RLOCK_SKIP_APT=1
PACKAGES=(build-essential cmake pkg-config libhiredis-dev uuid-dev redis-server lua5.1
          libcmocka-dev valgrind binutils clang clang-format clang-tidy python3)
PACKAGES+=(libssl-dev openssl) # TLS: the library links libssl; tests/tls/make_certs.sh runs openssl
# clang's sanitizer and libFuzzer runtimes, which the fuzz step links: clang only recommends them
# (through libclang-common-14-dev), and recommends are not installed.
PACKAGES+=(libclang-rt-14-dev)
# Sentinel tests (issue 13); the harness runs Sentinels as `redis-server --sentinel`.
PACKAGES+=(redis-sentinel)
# The Redisson peer of the compat tests (tests/compat/java, built by build_redisson_peer).
PACKAGES+=(openjdk-17-jdk-headless maven)
# libfaketime: test_redisson_java_fair runs a Redisson peer whose wall clock is shifted.
PACKAGES+=(faketime)
# test_observe checks the metrics text with prometheus_client's OpenMetrics parser.
PACKAGES+=(python3-prometheus-client)
# Loop clients' adapters (include/rlock/libuv.h, libevent.h): test_loop_uv, test_loop_event.
PACKAGES+=(libuv1-dev libevent-dev)
# shellcheck source=tests/lib/packages.sh
source "$ROOT/tests/lib/packages.sh"
rlock_install_packages "${PACKAGES[@]}"
# Valkey 8 for the valkey step, from bookworm-backports (added to apt's sources when missing). Its
# absence fails that step only.
rlock_enable_backports && rlock_install_packages valkey-server valkey-sentinel ||
    echo "valkey-server could not be installed: the valkey step will fail" >&2

# ---------------------------------------------------------------------------
# 2. Sanitizer runtime options.
# ---------------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# TSan (GCC 12) aborts with "unexpected memory mapping" when the kernel
# randomizes mmap too much; running without ASLR (setarch -R) avoids it.
NOASLR=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    NOASLR=(setarch "$(uname -m)" -R)
fi

# ---------------------------------------------------------------------------
# 3. Bookkeeping.
# ---------------------------------------------------------------------------
TOTAL_PASSED=0
TOTAL_FAILED=0
SUMMARY=()

record() { # step passed failed [detail]
    TOTAL_PASSED=$((TOTAL_PASSED + $2))
    TOTAL_FAILED=$((TOTAL_FAILED + $3))
    SUMMARY+=("$(printf '%-24s %4d passed, %4d failed%s' "$1" "$2" "$3" "${4:+  $4}")")
}

# run_ctest STEP BUILD_DIR [ctest args...]: runs ctest, counts its summary.
run_ctest() {
    local step=$1 dir=$2
    shift 2
    local out rc=0
    out=$(mktemp)
    log "$step: ctest $*"
    set +e
    (cd "$dir" && "${NOASLR[@]}" ctest --output-on-failure "$@" "${EXTRA_CTEST_ARGS[@]}") 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    set -e
    local line failed total skipped failed_names
    line=$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1 || true)
    skipped=$(grep -cE "\*\*\*Skipped" "$out" || true)
    if [ -n "$line" ]; then
        failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
        total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
        failed_names=$(sed -n '/The following tests FAILED:/,$p' "$out" \
            | grep -E '^[[:space:]]+[0-9]+ - ' | sed -E 's/^[[:space:]]+[0-9]+ - ([^ ]+).*/\1/' \
            | tr "\n" " " | sed "s/ *$//" || true)
        local detail=""
        [ -n "$failed_names" ] && detail="FAILED: $failed_names"
        [ "$skipped" -gt 0 ] && detail="${detail:+$detail }($skipped skipped)"
        record "$step" $((total - failed)) "$failed" "$detail"
    elif grep -q 'No tests were found' "$out"; then
        record "$step" 0 0 "(no tests)"
    else
        record "$step" 0 1 "ctest exited $rc without a summary"
    fi
    rm -f "$out"
}

# ---------------------------------------------------------------------------
# 4. Variants.
# ---------------------------------------------------------------------------
run_variant() {
    local v=$1 dir="$ROOT/build/$1" sanitize="" mult=1 exclude=""
    case "$v" in
        plain) ;;
        asan) sanitize="address,undefined"; mult=2; exclude="install|plain_only" ;;
        tsan) sanitize="thread"; mult=3; exclude="install|plain_only|no_tsan" ;;
        *) echo "unknown variant '$v' (plain, asan, tsan)" >&2; record "$v" 0 1 "unknown variant"; return ;;
    esac

    log "$v: configure ($dir)"
    mkdir -p "$dir"
    if ! cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DRLOCK_SANITIZE="$sanitize" -DRLOCK_WERROR=ON \
            -DRLOCK_BUILD_TESTS=ON -DRLOCK_BUILD_EXAMPLES=ON \
            -DRLOCK_TEST_TIMEOUT_MULTIPLIER="$mult" >"$dir/configure.log" 2>&1; then
        cat "$dir/configure.log"
        record "$v/configure" 0 1 "see $dir/configure.log"
        return
    fi

    log "$v: build"
    # Keep going past a broken target so the tests that did build still run
    # (ctest reports the missing executables as failed).
    local keep_going=()
    case "$(sed -n "s/^CMAKE_GENERATOR:INTERNAL=//p" "$dir/CMakeCache.txt")" in
        Ninja*) keep_going=(-- -k 0) ;;
        *Makefiles) keep_going=(-- -k) ;;
    esac
    if ! cmake --build "$dir" -j "$JOBS" "${keep_going[@]}" >"$dir/build.log" 2>&1; then
        grep -E -B2 -A6 "error|Error [0-9]" "$dir/build.log" | tail -n 200
        record "$v/build" 0 1 "see $dir/build.log"
    fi
    grep -iE 'warning:' "$dir/build.log" || true

    if [ "$QUICK" = 1 ]; then
        # Every unit test carries `quick` (tests/cmake/quick.cmake), so -L unit is the tier's
        # unit part; one regex, since two -L options mean "both" only from CMake 3.21 on.
        run_ctest "quick/unit" "$dir" -j "$JOBS" -L '^unit$'
        run_ctest "quick/redis" "$dir" -L '^quick$' -LE '^unit$'
    elif [ -z "$exclude" ]; then
        run_ctest "$v/unit" "$dir" -j "$JOBS" -L unit
        run_ctest "$v/other" "$dir" -LE "unit|memcheck$LONG_EXCLUDE"
        run_ctest "$v/valgrind" "$dir" -j "$JOBS" -L memcheck
    else
        run_ctest "$v/unit" "$dir" -j "$JOBS" -L unit -LE "$exclude"
        run_ctest "$v/other" "$dir" -LE "unit|memcheck|$exclude"
    fi
}

# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for RLOCK_FUZZ_SECONDS on
# its committed corpus; every target counts as one test, a crash as one failure.
run_fuzz() {
    local dir="$ROOT/build/fuzz" secs=${RLOCK_FUZZ_SECONDS:-12} out
    [ "$secs" -gt 0 ] || return 0
    log "fuzz: configure and build ($dir)"
    mkdir -p "$dir"
    if ! CC=clang cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DRLOCK_BUILD_FUZZ=ON -DRLOCK_SANITIZE=address,undefined \
            -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DRLOCK_WERROR=ON \
            -DRLOCK_BUILD_TESTS=OFF -DRLOCK_BUILD_EXAMPLES=OFF >"$dir/configure.log" 2>&1 ||
       ! cmake --build "$dir" -j "$JOBS" >"$dir/build.log" 2>&1; then
        tail -n 50 "$dir/configure.log" "$dir/build.log" 2>/dev/null || true
        record "fuzz/build" 0 1 "see $dir/build.log"
        return
    fi
    log "fuzz: each target ${secs}s"
    out=$("$ROOT/tests/fuzz/run.sh" "$dir" "$secs" 2>&1) || true
    echo "$out"
    record "fuzz" "$(grep -c '^PASS ' <<<"$out" || true)" "$(grep -c '^FAIL ' <<<"$out" || true)"
}

# build_redisson_peer: the Java peer of the compat tests (tests/compat/java), one jar per pinned
# Redisson version (the default profile and -Predisson3), before the plain variant, the only one
# that runs the tests labelled `redisson`. Maven downloads into ~/.m2 once and reuses it.
build_redisson_peer() {
    local pom="$ROOT/tests/compat/java/pom.xml" profile t0
    [ "${RLOCK_SKIP_JAVA:-0}" = 1 ] && return 0
    log "java: Redisson peer (Maven)"
    t0=$(date +%s)
    for profile in "" "-Predisson3"; do
        # shellcheck disable=SC2086 # an empty profile is no argument
        if ! mvn -q -B -Dstyle.color=never -f "$pom" package $profile; then
            record "java/build" 0 1 "mvn package $profile failed"
            return
        fi
    done
    record "java/build" 1 0 "($(( $(date +%s) - t0 ))s)"
}

# The valkey step: RLOCK_VALKEY_TESTS from the plain build with RLOCK_REDIS_SERVER=valkey-server,
# so every harness server is a Valkey (Sentinels `valkey-server --sentinel`, clusters made with
# valkey-cli). The default set takes about 2 minutes: one or a few representative tests of each
# suite, not the long failover stress tests (CONTRIBUTING, "Test variants").
VALKEY_TESTS_DEFAULT='^(core_client|core_scripts|core_errors|core_subscriber|core_armed|core_acl_minimal'
VALKEY_TESTS_DEFAULT+='|test_reentrant_(basic|stress|fencing|waiting)|test_fair_(grant|compat)'
VALKEY_TESTS_DEFAULT+='|test_rw_wake|test_multi|test_sem_(stress|compat)|test_latch_procs'
VALKEY_TESTS_DEFAULT+='|test_redisson_compat|test_redisson_compat_cluster|test_cli_accept|test_tls'
VALKEY_TESTS_DEFAULT+='|test_reentrant_basic_tls|test_sentinel_discovery|test_replica_stale'
VALKEY_TESTS_DEFAULT+='|test_loop_(uv|fair_uv|stress_uv)|test_cluster_(routing|pubsub|redirect|tls))$'
run_valkey() {
    local dir="$ROOT/build/plain" server
    server=$(command -v valkey-server || true)
    if [ -z "$server" ]; then
        record "valkey" 0 1 "no valkey-server (apt: bookworm-backports)"
        return
    fi
    local -x RLOCK_REDIS_SERVER=$server
    log "valkey: $("$server" --version)"
    run_ctest "valkey" "$dir" -R "${RLOCK_VALKEY_TESTS:-$VALKEY_TESTS_DEFAULT}" -LE "unit|memcheck$LONG_EXCLUDE"
}

# run_lint: tests/lint.sh prints "lint/<step>: N passed, N failed" per step (files checked).
run_lint() {
    local out
    out=$(mktemp)
    log "lint: clang-format + clang-tidy"
    local args=()
    [ "$QUICK" = 1 ] && args=(--changed)
    bash "$ROOT/tests/lint.sh" "${args[@]}" 2>&1 | tee "$out" || true
    local step line
    for step in format tidy; do
        line=$(grep -E "^lint/$step: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1 || true)
        if [ -n "$line" ]; then
            record "lint/$step" "$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")" \
                "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")"
        else
            record "lint/$step" 0 1 "tests/lint.sh gave no summary"
        fi
    done
    rm -f "$out"
}

START=$(date +%s)
[ "${RLOCK_SKIP_LINT:-0}" = 1 ] || run_lint
if [ "$QUICK" = 1 ]; then
    VARIANTS=plain
    RLOCK_VALKEY=0
    RLOCK_SKIP_JAVA=1
    RLOCK_FUZZ_SECONDS=0
fi
for v in $VARIANTS; do
    [ "$v" = plain ] && build_redisson_peer
    run_variant "$v"
    [ "$v" != plain ] || [ "${RLOCK_VALKEY:-1}" = 0 ] || run_valkey
done
run_fuzz

log "summary ($(( $(date +%s) - START ))s$([ "$QUICK" = 1 ] && echo ", quick tier"))"
for s in "${SUMMARY[@]}"; do
    echo "$s"
done
echo "${TOTAL_PASSED} passed, ${TOTAL_FAILED} failed"
[ "$TOTAL_FAILED" -eq 0 ]
