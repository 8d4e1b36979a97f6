#!/usr/bin/env bash
# tests/bench/run.sh - build and run the rlock benchmarks.
#
# Builds build/bench (Release, RLOCK_BUILD_BENCH=ON), starts its own redis-servers (3: the
# RedLock scenario needs independent servers; the other scenarios use the first; plus a master
# with 2 replicas for u1_sync and the *_sync hand-off and drain scenarios) on free
# loopback ports in a temp dir with --save '' --appendonly no, runs tests/bench/rlock_bench,
# and kills the servers by PID on exit. Prints the table while it runs, then one JSON line
# per scenario. Installs missing Debian packages like tests/run.sh does.
#
# Environment:
#   RLOCK_BENCH_REPS=9       repetitions per scenario (medians over them; the watchdog
#                            scenario times at most 5 sweep cycles of 15 s)
#   RLOCK_BENCH_SCALE=1      < 1 shortens every scenario (smoke runs), e.g. 0.1
#   RLOCK_BENCH_ONLY=...     comma-separated subset: u1,u1_tls,u8,handoff,handoff_fair,watchdog,sem,
#                            fair_queue,rw,rw_handoff,redlock,drain,u1_sync,handoff_sync,
#                            handoff_fair_sync,drain_sync,cluster,metrics (cluster:
#                            the bench starts a 3-master cluster itself, tests/harness),redisson,
#                            top (one rlock top refresh of 10,000 names),
#                            loop_waits,loop_handoff,loop_throughput (loop clients on libuv;
#                            built when libuv1-dev is installed)
#   RLOCK_REDISSON_JAR=...   the Redisson peer of the `redisson` scenario (default: the 4.x jar
#                            of tests/compat/java, built here with Maven when missing)
#   RLOCK_SKIP_APT=1         never call apt-get
#   RLOCK_JOBS=2             parallel build jobs
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$ROOT/build/bench"
REPS=${RLOCK_BENCH_REPS:-9}
SCALE=${RLOCK_BENCH_SCALE:-1}
JOBS=${RLOCK_JOBS:-2}

PACKAGES=(build-essential cmake pkg-config libhiredis-dev uuid-dev redis-server libcmocka-dev)
PACKAGES+=(libssl-dev openssl libuv1-dev)

install_packages() {
    local missing=() p
    command -v dpkg-query >/dev/null 2>&1 || return 0
    for p in "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
            echo "missing packages (${missing[*]}) and not root" >&2; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

if [ "${RLOCK_SKIP_APT:-0}" != 1 ]; then
    install_packages
fi

echo "=== build ($BUILD)"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRLOCK_BUILD_TESTS=ON \
    -DRLOCK_BUILD_BENCH=ON -DRLOCK_BUILD_EXAMPLES=OFF -DRLOCK_MEMCHECK_TESTS=OFF \
    >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target rlock_bench >"$BUILD/build.log" 2>&1 ||
    { tail -n 60 "$BUILD/build.log"; exit 1; }

TMP=$(mktemp -d /tmp/rlock-bench.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_server N [ARGS...]: starts server N on a free port with extra ARGS; sets PORT.
start_server() {
    local n=$1 tries=0 pid
    shift
    while [ $tries -lt 20 ]; do
        tries=$((tries + 1))
        PORT=$((20000 + RANDOM % 40000))
        port_free "$PORT" || continue
        mkdir -p "$TMP/s$n"
        local tls=()
        if [ "$n" = 1 ]; then # server 1 also listens for TLS (scenario u1_tls)
            TLS_PORT=$((20000 + RANDOM % 40000))
            port_free "$TLS_PORT" || continue
            tls=(--tls-port "$TLS_PORT" --tls-cert-file "$TMP/certs/server.crt"
                 --tls-key-file "$TMP/certs/server.key" --tls-ca-cert-file "$TMP/certs/ca.crt"
                 --tls-auth-clients no)
        fi
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$TMP/s$n" --logfile "$TMP/s$n/redis.log" --daemonize no "${tls[@]}" "$@" &
        pid=$!
        local i
        for i in $(seq 1 50); do
            if redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; then
                PIDS+=("$pid")
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "cannot start redis-server" >&2
    exit 1
}

sh "$ROOT/tests/tls/make_certs.sh" "$TMP/certs"
ARGS=()
for n in 1 2 3; do
    start_server "$n"
    ARGS+=(--port "$PORT")
done
ARGS+=(--tls-port "$TLS_PORT" --tls-ca "$TMP/certs/ca.crt")

# u1_sync, handoff_sync, handoff_fair_sync, drain_sync: a master (server 4) with 2 replicas
# (5, 6), waited for until both are online.
start_server 4
SYNC_PORT=$PORT
start_server 5 --replicaof 127.0.0.1 "$SYNC_PORT"
start_server 6 --replicaof 127.0.0.1 "$SYNC_PORT"
for i in $(seq 1 100); do
    [ "$(redis-cli -p "$SYNC_PORT" info replication | grep -c 'state=online')" = 2 ] && break
    sleep 0.1
done
ARGS+=(--sync-port "$SYNC_PORT")
[ -n "${RLOCK_BENCH_ONLY:-}" ] && ARGS+=(--only "$RLOCK_BENCH_ONLY")

# The redisson scenario's peer: Redisson 4.x from tests/compat/java (skipped without java/mvn).
if [ -z "${RLOCK_REDISSON_JAR:-}" ]; then
    RLOCK_REDISSON_JAR=$(ls "$ROOT"/tests/compat/java/target/4.*/redisson-peer-4.*.jar 2>/dev/null | head -n 1 || true)
    if [ -z "$RLOCK_REDISSON_JAR" ] && command -v mvn >/dev/null 2>&1; then
        mvn -q -B -f "$ROOT/tests/compat/java/pom.xml" package || true
        RLOCK_REDISSON_JAR=$(ls "$ROOT"/tests/compat/java/target/4.*/redisson-peer-4.*.jar 2>/dev/null | head -n 1 || true)
    fi
fi
export RLOCK_REDISSON_JAR

echo "=== rlock_bench (reps $REPS, scale $SCALE; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg))"
START=$(date +%s)
"$BUILD/tests/bench/rlock_bench" --reps "$REPS" --scale "$SCALE" "${ARGS[@]}"
echo "=== done in $(( $(date +%s) - START )) s"
