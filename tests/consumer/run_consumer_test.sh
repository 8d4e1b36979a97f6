#!/bin/sh
# run_consumer_test.sh CMAKE BUILD_DIR CONSUMER_SRC CC SHARED(0|1) [CONFIG]
# Installs BUILD_DIR into a temporary prefix, then builds and runs
# CONSUMER_SRC/main.c against it twice: with find_package(rlock) and with
# pkg-config. Used by the ctest `install_consumer`.
set -eu

cmake_exe=$1
build_dir=$2
consumer_src=$3
cc=$4
shared=$5
config=${6:-}

if ! command -v pkg-config >/dev/null 2>&1; then
    echo "pkg-config not found: skipped"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rlock-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "== cmake --install into $prefix"
if [ -n "$config" ]; then
    "$cmake_exe" --install "$build_dir" --prefix "$prefix" --config "$config" >"$tmp/install.log" 2>&1 \
        || { cat "$tmp/install.log"; exit 1; }
else
    "$cmake_exe" --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1 \
        || { cat "$tmp/install.log"; exit 1; }
fi
cat "$tmp/install.log"

libdir=$(dirname "$(find "$prefix" -name 'librlock.*' | head -n 1)")
pcdir=$(dirname "$(find "$prefix" -name rlock.pc | head -n 1)")
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== find_package(rlock)"
"$cmake_exe" -S "$consumer_src" -B "$tmp/cmake-build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release
"$cmake_exe" --build "$tmp/cmake-build"
"$tmp/cmake-build/rlock_consumer"

echo "== pkg-config rlock"
export PKG_CONFIG_PATH="$pcdir"
if [ "$shared" = 1 ]; then
    flags=$(pkg-config --cflags --libs rlock)
else
    flags=$(pkg-config --static --cflags --libs rlock)
fi
echo "pkg-config: $flags"
# shellcheck disable=SC2086 # word splitting of $flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc-consumer" "$consumer_src/main.c" $flags
"$tmp/pc-consumer"

echo "install_consumer: OK"
