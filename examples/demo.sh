#!/usr/bin/env bash
# examples/demo.sh - the one demo command: FIFO job processing under rlock's fair lock.
#
# Installs what is missing (Debian 12, as root or with sudo), configures and builds the library
# and the examples into build/demo, starts a throwaway redis-server on a free port in a temporary
# directory, runs examples/fifo_jobs with several worker processes, and prints what happened:
# which job waited how long, the order in which the workers got the lock, the hand-off times,
# a snapshot of the lock's queue as Redis holds it (Redisson's keys), and the checker's verdict.
# The server is killed by its PID on exit (trap), and the temporary directory removed.
#
# Environment: DEMO_WORKERS (4), DEMO_JOBS (16), DEMO_GAP_MS (25), DEMO_WORK_MS (40),
#              RLOCK_SKIP_APT=1 (never call apt-get), RLOCK_JOBS (build parallelism, 2).
# Exit status: 0 when the checker passes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build/demo"
WORKERS=${DEMO_WORKERS:-4}
JOBS=${DEMO_JOBS:-16}
GAP=${DEMO_GAP_MS:-25}
WORK=${DEMO_WORK_MS:-40}
LOCK=fifo-jobs:resource

say() { printf '\n== %s\n' "$*"; }

# ---------------------------------------------------------------------------------------------
# 1. Packages (the same list as tests/run.sh, minus what only the tests need).
# ---------------------------------------------------------------------------------------------
PACKAGES=(build-essential cmake pkg-config libhiredis-dev uuid-dev redis-server redis-tools)
PACKAGES+=(libssl-dev) # the library links OpenSSL (the demo itself stays on plain TCP)
# shellcheck source=tests/lib/packages.sh
source "$ROOT/tests/lib/packages.sh"
rlock_install_packages "${PACKAGES[@]}"

# ---------------------------------------------------------------------------------------------
# 2. Build.
# ---------------------------------------------------------------------------------------------
say "building into $BUILD"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLOCK_BUILD_TESTS=OFF \
    -DRLOCK_BUILD_EXAMPLES=ON >"$BUILD/demo-configure.log" 2>&1 \
    || { cat "$BUILD/demo-configure.log"; exit 2; }
cmake --build "$BUILD" -j "${RLOCK_JOBS:-2}" --target example_fifo_jobs \
    >"$BUILD/demo-build.log" 2>&1 || { tail -n 50 "$BUILD/demo-build.log"; exit 2; }
FIFO_JOBS=$(find "$BUILD" -type f -name fifo_jobs -perm -u+x | head -n 1)
[ -n "$FIFO_JOBS" ] || { echo "fifo_jobs was not built" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# 3. A throwaway redis-server on a free port, killed by PID on exit.
# ---------------------------------------------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rlock-demo.XXXXXX")
REDIS_PID=""
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
    if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { # port: 0 if something listens on it
    local hex
    hex=$(printf ':%04X ' "$1")
    grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

start_redis() {
    local port
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        port=$((20000 + RANDOM % 40000))
        port_in_use "$port" && continue
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
            --daemonize no --logfile "$TMP/redis.log" &
        REDIS_PID=$!
        for _ in $(seq 1 50); do
            if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
                PORT=$port
                return 0
            fi
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    done
    echo "could not start redis-server" >&2
    [ -f "$TMP/redis.log" ] && tail -n 20 "$TMP/redis.log" >&2
    return 1
}
PORT=""
start_redis
VERSION=$(redis-server --version | sed -E 's/.*v=([^ ]+).*/\1/')
say "redis-server $VERSION on 127.0.0.1:$PORT (pid $REDIS_PID, data in $TMP)"

# ---------------------------------------------------------------------------------------------
# 4. The run: jobs arrive one every GAP ms; each takes WORK ms, so a queue builds up.
# ---------------------------------------------------------------------------------------------
say "FIFO job processing: $JOBS jobs, $WORKERS worker processes, one fair lock"
"$FIFO_JOBS" --url "redis://127.0.0.1:$PORT" --name "$LOCK" --workers "$WORKERS" --jobs "$JOBS" \
    --gap "$GAP" --work "$WORK" --journal "$TMP/journal" >"$TMP/run.out" 2>&1 &
RUN_PID=$!

# While it runs, look at the lock as Redis holds it (Redisson's keys): who holds it, who waits.
sleep "$(awk -v g="$GAP" -v j="$JOBS" 'BEGIN { printf "%.3f", 0.3 + g * j / 2000.0 }')"
QUEUE="redisson_lock_queue:{$LOCK}"
ZSET="redisson_lock_timeout:{$LOCK}"
# The server's clock in ms (the deadlines are on it); bash arithmetic is 64-bit, awk's is not.
mapfile -t T < <(redis-cli -p "$PORT" TIME)
NOW=$((T[0] * 1000 + T[1] / 1000))
{
    echo "snapshot in the middle of the run:"
    echo "  lock hash '$LOCK' (owner = <client-uuid>:<thread-id> -> hold count):"
    redis-cli -p "$PORT" HGETALL "$LOCK" | paste - - | sed 's/^/    /'
    echo "  queue '$QUEUE', first in line first, with each waiter's liveness deadline:"
    i=0
    for owner in $(redis-cli -p "$PORT" LRANGE "$QUEUE" 0 -1); do
        i=$((i + 1))
        score=$(redis-cli -p "$PORT" ZSCORE "$ZSET" "$owner")
        [ -n "$score" ] || continue
        printf '    %2d. %s  (deadline in %d ms; its heartbeat keeps moving it)\n' "$i" "$owner" \
            $((${score%.*} - NOW))
    done
    [ "$i" -eq 0 ] && echo "    (empty)"
} || true

set +e
wait "$RUN_PID"
RC=$?
set -e
say "what happened (times in ms from the first arrival; one line per job, in lock order)"
cat "$TMP/run.out"
LEFT_QUEUE=$(redis-cli -p "$PORT" LLEN "$QUEUE")
LEFT_ZSET=$(redis-cli -p "$PORT" ZCARD "$ZSET")
LEFT_LOCK=$(redis-cli -p "$PORT" EXISTS "$LOCK")
say "after the run: queue length $LEFT_QUEUE, deadlines left $LEFT_ZSET, lock held: $LEFT_LOCK"
if [ "$RC" -eq 0 ]; then
    say "verdict: PASS - the jobs were applied strictly in arrival order"
else
    say "verdict: FAIL (exit status $RC)"
fi
exit "$RC"
