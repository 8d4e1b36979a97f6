#!/usr/bin/env bash
# tests/lint.sh - the style a machine keeps: clang-format and clang-tidy (clang 14).
#
#   tests/lint.sh            check every C source and header git tracks (include/ src/ cli/
#                            tests/ examples/): clang-format --dry-run --Werror on each, then
#                            clang-tidy with the repo's .clang-tidy over every translation unit
#                            of a build configured with compile_commands.json (build/lint).
#   tests/lint.sh --fix      rewrite the files with clang-format instead of checking them.
#
# Prints one line per step, "lint/format: N passed, N failed" and "lint/tidy: ...", counting
# files, and exits non-zero when any file fails. tests/run.sh runs it before the variants.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
FIX=0
[ "${1:-}" = "--fix" ] && FIX=1
JOBS=${RLOCK_JOBS:-2}
FORMAT=${CLANG_FORMAT:-clang-format}
TIDY=${CLANG_TIDY:-clang-tidy}

# The C files of the project: tracked by git when this is a checkout, else found on disk.
list_sources() {
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -co --exclude-standard -- '*.c' '*.h'
    else
        find include src cli tests examples -name '*.[ch]' 2>/dev/null
    fi | grep -E '^(include|src|cli|tests|examples)/' | grep -v '/corpus/' | sort -u
}
mapfile -t FILES < <(list_sources)

# ---- clang-format ------------------------------------------------------------------------
fmt_bad=()
for f in "${FILES[@]}"; do
    [ -f "$f" ] || continue
    if [ "$FIX" = 1 ]; then
        "$FORMAT" -i "$f"
    elif ! "$FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then
        fmt_bad+=("$f")
    fi
done
if [ "$FIX" = 1 ]; then
    echo "lint: formatted ${#FILES[@]} files"
    exit 0
fi
for f in "${fmt_bad[@]}"; do
    echo "clang-format: $f differs from .clang-format; first differences:"
    "$FORMAT" --dry-run "$f" 2>&1 | grep -m 3 -A 2 'warning:' || true
done
echo "lint/format: $(( ${#FILES[@]} - ${#fmt_bad[@]} )) passed, ${#fmt_bad[@]} failed"

# ---- clang-tidy --------------------------------------------------------------------------
# A configured build gives clang-tidy the real compile flags; the library target also produces
# the generated script header that sources include.
BUILD="$ROOT/build/lint"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DRLOCK_BUILD_TESTS=ON \
    -DRLOCK_BUILD_EXAMPLES=ON -DRLOCK_BUILD_BENCH=ON >"$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log"; echo "lint/tidy: 0 passed, 1 failed"; exit 1; }
cmake --build "$BUILD" --target rlock_internal -j "$JOBS" >"$BUILD.build.log" 2>&1 ||
    { tail -n 50 "$BUILD.build.log"; echo "lint/tidy: 0 passed, 1 failed"; exit 1; }

# Every tracked .c file that the build compiles (a file the build does not know cannot be
# checked with the right flags, and is reported as such).
mapfile -t UNITS < <(printf '%s\n' "${FILES[@]}" | grep '\.c$')
known=$(grep -o '"file": *"[^"]*"' "$BUILD/compile_commands.json" | sed -E 's/.*"([^"]*)"$/\1/')
checked=()
for f in "${UNITS[@]}"; do
    if grep -qxF "$ROOT/$f" <<<"$known"; then
        checked+=("$f")
    fi
done
out=$(mktemp)
printf '%s\n' "${checked[@]}" |
    xargs -P "$JOBS" -I{} sh -c '"$0" -p "$1" --quiet "$2" 2>/dev/null | sed "s|^|{}: |"' \
        "$TIDY" "$BUILD" {} >"$out" || true
tidy_bad=$(grep -E 'warning:|error:' "$out" | sed -E 's/^([^:]*): .*/\1/' | sort -u || true)
if [ -n "$tidy_bad" ]; then
    grep -E -A 3 'warning:|error:' "$out" | sed -E 's/^[^:]*: //' | head -n 200
fi
n_bad=$(grep -c . <<<"$tidy_bad" || true)
rm -f "$out"
echo "lint/tidy: $(( ${#checked[@]} - n_bad )) passed, ${n_bad} failed"
[ "${#fmt_bad[@]}" -eq 0 ] && [ "$n_bad" -eq 0 ]
