#!/usr/bin/env bash
# examples/uv_server_demo.sh - two uv_server processes, many connections, counters that add up.
#
# Builds examples/uv_server into build/demo (unless --server names a built one), starts a
# throwaway redis-server on a free loopback port in a temporary directory and two uv_server
# processes on it, then drives them with CONNS concurrent connections (half on each server),
# each sending REQS requests over KEYS keys and waiting for each answer. Every request takes the
# key's fair lock on its server's loop client and does GET then SET of the key's counter, so a
# lost increment would show a broken exclusion between the two processes. The check: each
# counter on Redis equals the requests sent for its key, the answers for a key are exactly
# 1..N (no count given twice), the lock queues are empty, and both servers exit cleanly on
# SIGTERM. Everything started is stopped by its PID on exit (trap), the directory removed.
#
# usage: examples/uv_server_demo.sh [--server PATH]   (ctest passes the built uv_server)
# Environment: DEMO_CONNS (50), DEMO_REQS (20), DEMO_KEYS (5), RLOCK_SKIP_APT=1 (never call
#              apt-get), RLOCK_JOBS (build parallelism, 2), RLOCK_REDIS_SERVER (redis-server).
# Exit status: 0 when the check passes, 77 without python3 (the clients are a Python script).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONNS=${DEMO_CONNS:-50}
REQS=${DEMO_REQS:-20}
KEYS=${DEMO_KEYS:-5}
SERVER=""
if [ "${1:-}" = "--server" ]; then
    SERVER=$2
fi
REDIS_SERVER=${RLOCK_REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_SERVER%-server}-cli

say() { printf '\n== %s\n' "$*"; }

# 1. The server program: the one given, or a build of it (packages as examples/demo.sh).
if [ -z "$SERVER" ]; then
    PACKAGES=(build-essential cmake pkg-config libhiredis-dev uuid-dev libssl-dev libuv1-dev)
    PACKAGES+=(redis-server redis-tools python3)
    # shellcheck source=tests/lib/packages.sh
    source "$ROOT/tests/lib/packages.sh"
    rlock_install_packages "${PACKAGES[@]}"
    BUILD="$ROOT/build/demo"
    say "building uv_server into $BUILD"
    mkdir -p "$BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLOCK_BUILD_TESTS=OFF \
        -DRLOCK_BUILD_EXAMPLES=ON >"$BUILD/uv-demo-configure.log" 2>&1 \
        || { cat "$BUILD/uv-demo-configure.log"; exit 2; }
    cmake --build "$BUILD" -j "${RLOCK_JOBS:-2}" --target example_uv_server \
        >"$BUILD/uv-demo-build.log" 2>&1 || { tail -n 50 "$BUILD/uv-demo-build.log"; exit 2; }
    SERVER=$(find "$BUILD" -type f -name uv_server -perm -u+x | head -n 1)
fi
[ -x "$SERVER" ] || { echo "uv_server_demo: no uv_server program ($SERVER)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "uv_server_demo: python3 is missing, skipped" >&2; exit 77; }

# 2. A throwaway redis-server on a free port and two uv_servers, all stopped by PID on exit.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rlock-uv-demo.XXXXXX")
PIDS=()
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { grep -q "$(printf ':%04X ' "$1")" /proc/net/tcp /proc/net/tcp6 2>/dev/null; }

PORT=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
    p=$((20000 + RANDOM % 40000))
    port_in_use "$p" && continue
    "$REDIS_SERVER" --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no --logfile "$TMP/redis.log" &
    PIDS+=($!)
    for _ in $(seq 1 50); do
        if "$REDIS_CLI" -p "$p" PING 2>/dev/null | grep -q PONG; then
            PORT=$p
            break 2
        fi
        kill -0 "${PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    kill "${PIDS[-1]}" 2>/dev/null || true
    wait "${PIDS[-1]}" 2>/dev/null || true
    unset 'PIDS[-1]'
done
[ -n "$PORT" ] || { echo "uv_server_demo: could not start $REDIS_SERVER" >&2; exit 2; }
say "$REDIS_SERVER on 127.0.0.1:$PORT (data in $TMP)"

SPORTS=()
for i in 1 2; do
    "$SERVER" --url "redis://127.0.0.1:$PORT" --port 0 >"$TMP/server$i.out" 2>"$TMP/server$i.err" &
    PIDS+=($!)
    for _ in $(seq 1 100); do
        grep -q '^listening on' "$TMP/server$i.out" 2>/dev/null && break
        sleep 0.05
    done
    sport=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$TMP/server$i.out")
    [ -n "$sport" ] || { cat "$TMP/server$i.err" >&2; exit 2; }
    SPORTS+=("$sport")
    echo "uv_server $i (pid ${PIDS[-1]}) on 127.0.0.1:$sport"
done

# 3. The clients: CONNS connections at once, alternating servers, REQS requests each.
say "$CONNS connections x $REQS requests over $KEYS keys, half on each server"
python3 - "$CONNS" "$REQS" "$KEYS" "${SPORTS[@]}" >"$TMP/answers" <<'EOF'
import asyncio, sys
conns, reqs, keys, ports = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
async def client(i):
    r, w = await asyncio.open_connection("127.0.0.1", int(ports[i % len(ports)]))
    out = []
    for j in range(reqs):
        w.write(b"key%d\n" % ((i * 7 + j) % keys))
        await w.drain()
        out.append((await r.readline()).decode().strip())
    w.close()
    return out
async def main():
    for answers in await asyncio.gather(*(client(i) for i in range(conns))):
        for a in answers:
            print(a)
asyncio.run(main())
EOF

# 4. The check, on Redis and on the answers.
FAIL=0
for ((k = 0; k < KEYS; k++)); do
    want=0
    for ((i = 0; i < CONNS; i++)); do
        for ((j = 0; j < REQS; j++)); do
            [ $(((i * 7 + j) % KEYS)) -eq "$k" ] && want=$((want + 1))
        done
    done
    got=$("$REDIS_CLI" -p "$PORT" GET "uv_server:count:key$k")
    answers=$(awk -v k="key$k" '$1 == k { print $2 }' "$TMP/answers" | sort -n | tr '\n' ' ')
    expect=$(seq 1 "$want" | tr '\n' ' ')
    queue=$("$REDIS_CLI" -p "$PORT" LLEN "redisson_lock_queue:{uv_server:lock:key$k}")
    printf 'key%d: counter %s, increments %d, queue left %s\n' "$k" "$got" "$want" "$queue"
    if [ "$got" != "$want" ] || [ "$answers" != "$expect" ] || [ "$queue" != 0 ]; then
        FAIL=1
    fi
done
grep -v '^key' "$TMP/answers" | head -n 5 && FAIL=1

# 5. Both servers stop on SIGTERM, having freed everything (a sanitizer build reports leaks).
for i in 1 2; do
    pid=${PIDS[$i]}
    kill -TERM "$pid"
    if ! wait "$pid"; then
        echo "uv_server $i did not exit cleanly:" && cat "$TMP/server$i.err"
        FAIL=1
    fi
    grep -h 'requests served' "$TMP/server$i.err" || true
done
PIDS=("${PIDS[0]}")

if [ "$FAIL" -eq 0 ]; then
    say "verdict: PASS - every increment counted once across the two processes"
else
    say "verdict: FAIL"
fi
exit "$FAIL"
