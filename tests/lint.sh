#!/usr/bin/env bash
# tests/lint.sh - the style a machine keeps: clang-format and clang-tidy (clang 14).
#
#   tests/lint.sh            check every C source and header git tracks (include/ src/ cli/
#                            tests/ examples/): clang-format --dry-run --Werror on each, then
#                            clang-tidy with the repo's .clang-tidy over every translation unit
#                            of a build configured with compile_commands.json (build/lint).
#   tests/lint.sh --fix      rewrite the files with clang-format instead of checking them.
#   tests/lint.sh --build-dir DIR   configure the clang-tidy build in DIR (any path, also outside
#                            the tree; default build/lint, or $RLOCK_LINT_BUILD when set).
#   tests/lint.sh --changed  clang-format every file as above, but clang-tidy only the .c files
#                            changed since the branch left $RLOCK_LINT_BASE (default main), committed
#                            or not, and for a changed header the .c file of its name (else the
#                            first one that includes it). tests/run.sh --quick uses it.
#
# Prints one line per step, "lint/format: N passed, N failed" and "lint/tidy: ...", counting
# files, and exits non-zero when any file fails. tests/run.sh runs it before the variants.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CALLER_DIR=$PWD
cd "$ROOT"
FIX=0
CHANGED=0
BUILD=${RLOCK_LINT_BUILD:-$ROOT/build/lint}
while [ $# -gt 0 ]; do
    case "$1" in
    --fix) FIX=1 ;;
    --changed) CHANGED=1 ;;
    --build-dir)
        [ $# -ge 2 ] || { echo "lint.sh: --build-dir needs a directory" >&2; exit 2; }
        BUILD=$2
        shift
        ;;
    *) echo "usage: tests/lint.sh [--fix] [--changed] [--build-dir DIR]" >&2; exit 2 ;;
    esac
    shift
done
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
# the generated script header that sources include. A relative DIR means one under the
# caller's directory, not under the tree the script has changed into.
case "$BUILD" in /*) ;; *) BUILD="$CALLER_DIR/$BUILD" ;; esac
mkdir -p "$BUILD" # a fresh clone has no build/ yet
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DRLOCK_BUILD_TESTS=ON \
    -DRLOCK_BUILD_EXAMPLES=ON -DRLOCK_BUILD_BENCH=ON >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log"; echo "lint/tidy: 0 passed, 1 failed"; exit 1; }
cmake --build "$BUILD" --target rlock_internal -j "$JOBS" >"$BUILD/build.log" 2>&1 ||
    { tail -n 50 "$BUILD/build.log"; echo "lint/tidy: 0 passed, 1 failed"; exit 1; }

# The .c files that stand for the changes since the branch left its base (--changed): changed
# .c files, and for a changed header the .c file of its name or else the first that includes it,
# through which clang-tidy reads the header (HeaderFilterRegex).
changed_units() {
    local base f stem
    base=$(git merge-base HEAD "${RLOCK_LINT_BASE:-main}" 2>/dev/null || git rev-parse HEAD)
    { git diff --name-only "$base" --; git ls-files -o --exclude-standard; } | sort -u |
        while read -r f; do
            case "$f" in
            *.c) echo "$f" ;;
            *.h)
                stem=${f%.h}
                if [ -f "$stem.c" ]; then
                    echo "$stem.c"
                else
                    printf '%s\n' "${FILES[@]}" | grep '\.c$' |
                        xargs grep -lF "$(basename "$f")\"" 2>/dev/null | head -n 1 || true
                fi
                ;;
            esac
        done | sort -u
}

# Every tracked .c file that the build compiles (a file the build does not know cannot be
# checked with the right flags, and is reported as such); with --changed, those of the changes.
if [ "$CHANGED" = 1 ]; then
    mapfile -t UNITS < <(comm -12 <(changed_units) <(printf '%s\n' "${FILES[@]}" | sort))
else
    mapfile -t UNITS < <(printf '%s\n' "${FILES[@]}" | grep '\.c$')
fi
known=$(grep -o '"file": *"[^"]*"' "$BUILD/compile_commands.json" | sed -E 's/.*"([^"]*)"$/\1/')
checked=()
for f in "${UNITS[@]}"; do
    if grep -qxF "$ROOT/$f" <<<"$known"; then
        checked+=("$f")
    fi
done
# One report per file, so that parallel runs never interleave their output.
outdir=$(mktemp -d)
[ "${#checked[@]}" -eq 0 ] || printf '%s\n' "${checked[@]}" |
    xargs -P "$JOBS" -I{} sh -c '"$0" -p "$1" --quiet "$2" >"$3/$(echo "$2" | tr / _).txt" 2>&1' \
        "$TIDY" "$BUILD" {} "$outdir" || true
n_bad=0
for f in "${checked[@]}"; do
    rep="$outdir/$(echo "$f" | tr / _).txt"
    if grep -qE '(warning|error): ' "$rep"; then
        n_bad=$((n_bad + 1))
        echo "clang-tidy: $f"
        grep -E -A 3 '(warning|error): ' "$rep" | head -n 40
    fi
done
rm -rf "$outdir"
echo "lint/tidy: $(( ${#checked[@]} - n_bad )) passed, ${n_bad} failed"
[ "${#fmt_bad[@]}" -eq 0 ] && [ "$n_bad" -eq 0 ]
