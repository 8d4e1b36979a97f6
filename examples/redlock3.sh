#!/usr/bin/env bash
# examples/redlock3.sh - RedLock over three independent Redis servers, with a server outage.
#
# Builds examples/redlock3 (into build/redlock3, unless REDLOCK3 names a built binary), starts
# three throwaway redis-servers (1, 2 and 3) on free ports in a temporary directory, and runs two
# redlock3 processes at once against them (a shared counter file guarded by one RedLock). One
# second in, server 2 is killed (SIGKILL, by PID); following the Redlock restart-delay rule it is
# brought back on the same port, empty (no persistence), only after the longest lease has passed,
# so no lock it granted before dying can still be valid elsewhere. 2 of 3 is a majority, so the
# run goes on meanwhile; the counter is printed when server 2 dies and after the outage. Finally
# the checker verifies the counter (no lost update) and that the fencing tokens strictly increase
# in grant order. Servers are killed by PID on exit (trap).
#
# Environment: REDLOCK3 (binary), THREADS (4), ITERATIONS (250), LEASE_MS (2000), RLOCK_JOBS (2).
# Exit status: 0 when the check passes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
THREADS=${THREADS:-4}
ITERATIONS=${ITERATIONS:-250}
LEASE_MS=${LEASE_MS:-2000}

say() { printf '\n== %s\n' "$*"; }

# shellcheck source=tests/lib/packages.sh
source "$ROOT/tests/lib/packages.sh"
rlock_install_packages build-essential cmake pkg-config libhiredis-dev libssl-dev uuid-dev redis-server

BIN=${REDLOCK3:-}
if [ -z "$BIN" ]; then
    BUILD="$ROOT/build/redlock3"
    say "building examples/redlock3 into $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLOCK_BUILD_TESTS=OFF \
        -DRLOCK_BUILD_EXAMPLES=ON >"$BUILD.configure.log" 2>&1 \
        || { cat "$BUILD.configure.log"; exit 2; }
    cmake --build "$BUILD" -j "${RLOCK_JOBS:-2}" --target example_redlock3 >"$BUILD.build.log" 2>&1 \
        || { tail -n 50 "$BUILD.build.log"; exit 2; }
    BIN=$(find "$BUILD" -type f -name redlock3 -perm -u+x | head -n 1)
fi
[ -x "$BIN" ] || { echo "redlock3 binary not found" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rlock-redlock3.XXXXXX")
PIDS=("" "" "")
PORTS=("" "" "")
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_in_use() { # port: 0 if something listens on it
    local hex
    hex=$(printf ':%04X ' "$1")
    grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# start_redis i [port]: starts server i (on a free port, or on the given one), sets PIDS/PORTS.
start_redis() {
    local i=$1 port=${2:-} tries
    for tries in 1 2 3 4 5 6 7 8 9 10; do
        if [ -z "${2:-}" ]; then
            port=$((20000 + RANDOM % 40000))
            port_in_use "$port" && continue
        fi
        mkdir -p "$TMP/s$i"
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$TMP/s$i" --daemonize no --logfile "$TMP/s$i/redis.log" &
        PIDS[i]=$!
        for _ in $(seq 1 50); do
            if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
                PORTS[i]=$port
                return 0
            fi
            kill -0 "${PIDS[i]}" 2>/dev/null || break
            sleep 0.1
        done
        kill "${PIDS[i]}" 2>/dev/null || true
        wait "${PIDS[i]}" 2>/dev/null || true
        PIDS[i]=""
        [ -n "${2:-}" ] && [ "$tries" -ge 3 ] && break
    done
    echo "could not start redis-server $i" >&2
    return 1
}

# The counter as the processes left it (they replace the file whole, see redlock3.c), 0 before
# the first section.
counter_now() {
    cat "$TMP/counter" 2>/dev/null || echo 0
}

for i in 0 1 2; do
    start_redis "$i"
done
URLS="redis://127.0.0.1:${PORTS[0]},redis://127.0.0.1:${PORTS[1]},redis://127.0.0.1:${PORTS[2]}"
say "three independent servers 1, 2, 3: ports ${PORTS[*]} (pids ${PIDS[*]})"

say "two processes x $THREADS threads x $ITERATIONS sections, lease $LEASE_MS ms"
"$BIN" --servers "$URLS" --dir "$TMP" --threads "$THREADS" --iterations "$ITERATIONS" \
    --lease "$LEASE_MS" >"$TMP/p1.out" 2>&1 &
P1=$!
"$BIN" --servers "$URLS" --dir "$TMP" --threads "$THREADS" --iterations "$ITERATIONS" \
    --lease "$LEASE_MS" >"$TMP/p2.out" 2>&1 &
P2=$!

sleep 1
say "killing server 2 (port ${PORTS[1]}, pid ${PIDS[1]}) mid-run; counter now $(counter_now)"
kill -9 "${PIDS[1]}"
wait "${PIDS[1]}" 2>/dev/null || true
PIDS[1]=""
DELAY=$(awk -v l="$LEASE_MS" 'BEGIN { printf "%.3f", l / 1000.0 + 0.1 }')
say "restart-delay rule: server 2 stays away for the longest lease (${DELAY} s) before it rejoins empty"
sleep "$DELAY"
echo "counter after the outage: $(counter_now) (the 2 remaining servers are a majority)"
start_redis 1 "${PORTS[1]}"
say "server 2 is back on port ${PORTS[1]} (pid ${PIDS[1]}), empty"

set +e
wait "$P1"
RC1=$?
wait "$P2"
RC2=$?
set -e
say "the processes"
cat "$TMP/p1.out" "$TMP/p2.out"
say "keys left on the servers: $(for i in 0 1 2; do redis-cli -p "${PORTS[i]}" EXISTS redlock3:counter; done | paste -sd' ')"
say "check"
set +e
"$BIN" --check "$TMP" --expect $((2 * THREADS * ITERATIONS))
RC=$?
set -e
if [ "$RC" -eq 0 ] && [ "$RC1" -eq 0 ] && [ "$RC2" -eq 0 ]; then
    say "verdict: PASS"
    exit 0
fi
say "verdict: FAIL (processes $RC1 $RC2, check $RC)"
exit 1
