#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR [SECONDS] - runs every libFuzzer target of BUILD_DIR for SECONDS
# (default 45) on its committed seed corpus, tests/fuzz/corpus/<target>/. New inputs go to a
# temporary directory, never into the committed corpus; a crash's reproducer is kept in
# BUILD_DIR/fuzz-artifacts/. Prints one line per target, "PASS <target>" or "FAIL <target>", and
# exits non-zero if any target failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]}
SECONDS_EACH=${2:-45}
ARTIFACTS="$BUILD/fuzz-artifacts"
mkdir -p "$ARTIFACTS"
failed=0
for corpus in "$HERE"/corpus/*/; do
    target=$(basename "$corpus")
    exe=$(find "$BUILD" -type f -name "$target" -perm -u+x | head -n 1)
    if [ -z "$exe" ]; then
        echo "FAIL $target (not built)"
        failed=1
        continue
    fi
    work=$(mktemp -d)
    if "$exe" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
            -artifact_prefix="$ARTIFACTS/$target-" "$work" "$corpus" >"$ARTIFACTS/$target.log" 2>&1; then
        echo "PASS $target ($(grep -E 'stat::number_of_executed_units' "$ARTIFACTS/$target.log" \
            | sed -E 's/.*: *//') runs)"
    else
        tail -n 40 "$ARTIFACTS/$target.log"
        echo "FAIL $target (see $ARTIFACTS/$target.log)"
        failed=1
    fi
    rm -rf "$work"
done
exit "$failed"
