#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR [SECONDS] - runs every libFuzzer target of BUILD_DIR for SECONDS
# (default 45) on its committed seed corpus, tests/fuzz/corpus/<target>/. New inputs go to a
# temporary directory, never into the committed corpus; a crash's reproducer is kept in
# BUILD_DIR/fuzz-artifacts/. Prints one line per target, "PASS <target>" or "FAIL <target>", and
# exits non-zero if any target failed. RLOCK_JOBS (default 2) targets run at once.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
SECONDS_EACH=${2:-45}
ARTIFACTS="$BUILD/fuzz-artifacts"
mkdir -p "$ARTIFACTS"
JOBS=${RLOCK_JOBS:-2}
RESULTS=$(mktemp -d)

# fuzz_one CORPUS: runs one target; its report goes to $RESULTS/<target>, "FAIL" marks a failure.
fuzz_one() {
    local corpus=$1 target exe work
    target=$(basename "$corpus")
    exe=$(find "$BUILD" -type f -name "$target" -perm -u+x | head -n 1)
    if [ -z "$exe" ]; then
        echo "FAIL $target (not built)" >"$RESULTS/$target"
        return
    fi
    work=$(mktemp -d)
    if "$exe" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
            -artifact_prefix="$ARTIFACTS/$target-" "$work" "$corpus" >"$ARTIFACTS/$target.log" 2>&1; then
        echo "PASS $target ($(grep -E 'stat::number_of_executed_units' "$ARTIFACTS/$target.log" \
            | sed -E 's/.*: *//') runs)" >"$RESULTS/$target"
    else
        { tail -n 40 "$ARTIFACTS/$target.log"; echo "FAIL $target (see $ARTIFACTS/$target.log)"; } \
            >"$RESULTS/$target"
    fi
    rm -rf "$work"
}

# Each target is one single-threaded process: RLOCK_JOBS of them run at once, each still for its
# full SECONDS, so the step takes SECONDS * ceil(targets / jobs) instead of SECONDS * targets.
running=0
for corpus in "$HERE"/corpus/*/; do
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$corpus" &
    running=$((running + 1))
done
wait
failed=0
for corpus in "$HERE"/corpus/*/; do
    cat "$RESULTS/$(basename "$corpus")"
    grep -q '^FAIL ' "$RESULTS/$(basename "$corpus")" && failed=1
done
rm -rf "$RESULTS"
exit "$failed"
