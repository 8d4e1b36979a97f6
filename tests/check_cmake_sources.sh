#!/bin/sh
# check_cmake_sources.sh CMAKE SOURCE_DIR
# A source listed in RLOCK_SOURCE_LIST but missing must stop the configure step, not be skipped:
# configures a copy of the tree (symbolic links, src/locks/inspect.c left out) and expects a failure
# that names the file. Used by the test cmake_missing_source.
set -eu

cmake=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/tree" "$work/tree/src"
for f in "$src"/* "$src"/.clang-format; do
    [ -e "$f" ] || continue
    case "$(basename "$f")" in
    src | build) ;;
    *) ln -s "$f" "$work/tree/$(basename "$f")" ;;
    esac
done
# src/ is copied one layer folder at a time, so that one file can be left out.
for d in "$src"/src/*/; do
    d=$(basename "$d")
    mkdir "$work/tree/src/$d"
    for f in "$src/src/$d"/*; do
        [ "$d/$(basename "$f")" = locks/inspect.c ] || ln -s "$f" "$work/tree/src/$d/$(basename "$f")"
    done
done

if "$cmake" -S "$work/tree" -B "$work/build" -DRLOCK_BUILD_TESTS=OFF -DRLOCK_BUILD_EXAMPLES=OFF \
    -DRLOCK_BUILD_CLI=OFF >"$work/log" 2>&1; then
    echo "check_cmake_sources: configure succeeded without src/locks/inspect.c"
    exit 1
fi
if ! grep -q 'src/locks/inspect.c' "$work/log"; then
    echo "check_cmake_sources: configure failed without naming src/locks/inspect.c:"
    cat "$work/log"
    exit 1
fi
echo "check_cmake_sources: OK"
