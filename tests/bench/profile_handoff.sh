#!/usr/bin/env bash
# tests/bench/profile_handoff.sh - where the time of a contended hand-off goes.
#
# Runs the hand-off scenarios of tests/bench/run.sh (reentrant and fair; ideal and rlock) under
# `perf sched record -k mono`, with RLOCK_BENCH_TRACE set so that the bench writes each hand-off
# (unlock and acquire times, thread ids) to a file, then lines the two up with
# tests/bench/handoff_profile.py: the chain of wake-ups from the unlock returning to the next
# acquire returning, step by step, as medians in microseconds.
#
# Usage: tests/bench/profile_handoff.sh [reps]      (default 1; needs root for perf)
# Environment: RLOCK_BENCH_ONLY (default handoff,handoff_fair), RLOCK_PROFILE_DIR (kept output).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! command -v perf >/dev/null 2>&1; then
    if [ "${RLOCK_SKIP_APT:-0}" != 1 ] && [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-perf
    else
        echo "perf is not installed (Debian: linux-perf)" >&2
        exit 1
    fi
fi
OUT=${RLOCK_PROFILE_DIR:-$(mktemp -d /tmp/rlock-profile.XXXXXX)}
mkdir -p "$OUT"
rm -f "$OUT/handoffs.txt"
RLOCK_BENCH_TRACE="$OUT/handoffs.txt" RLOCK_BENCH_ONLY=${RLOCK_BENCH_ONLY:-handoff,handoff_fair} \
    RLOCK_BENCH_REPS=${1:-1} \
    perf sched record -k mono -o "$OUT/sched.data" -- "$ROOT/tests/bench/run.sh" | tee "$OUT/bench.txt"
perf script -i "$OUT/sched.data" >"$OUT/sched.txt" 2>/dev/null
echo "=== where a hand-off's time goes (trace and data in $OUT)"
python3 "$ROOT/tests/bench/handoff_profile.py" "$OUT/handoffs.txt" "$OUT/sched.txt"
