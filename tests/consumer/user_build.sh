#!/bin/sh
# user_build.sh CMAKE SRC WORK
# A new user's build as README "Build and install" writes it, on a machine without cmocka:
# pkg-config is given every .pc file of the system but cmocka's. The build must configure (with
# a notice that the tests are off), build and install into WORK/prefix; asking for the tests
# with -DRLOCK_BUILD_TESTS=ON must still fail at configure time. Used by the test first_hour.
set -eu

cmake_exe=$1
src=$2
work=$3

# A pkg-config search path that lacks cmocka alone.
pcdir=$work/pkgconfig
mkdir -p "$pcdir"
for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
    [ -d "$d" ] || continue
    for f in "$d"/*.pc; do
        [ -e "$f" ] || continue
        base=${f##*/}
        [ "$base" = cmocka.pc ] && continue
        [ -e "$pcdir/$base" ] || ln -s "$f" "$pcdir/$base"
    done
done
PKG_CONFIG_LIBDIR=$pcdir
export PKG_CONFIG_LIBDIR
unset PKG_CONFIG_PATH
if pkg-config --exists cmocka; then
    echo "user_build: cmocka is still visible to pkg-config"
    exit 1
fi

echo "== configure as README says (cmocka hidden)"
if ! "$cmake_exe" -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1; then
    cat "$work/configure.log"
    echo "user_build: the README's configure fails without cmocka"
    exit 1
fi
grep 'cmocka not found, tests are off' "$work/configure.log" || {
    cat "$work/configure.log"
    echo "user_build: no notice that the tests are off"
    exit 1
}
grep -q '^RLOCK_BUILD_TESTS:BOOL=OFF$' "$work/build/CMakeCache.txt" || {
    echo "user_build: RLOCK_BUILD_TESTS is not OFF"
    exit 1
}

echo "== build and install into $work/prefix"
"$cmake_exe" --build "$work/build" -j 2 >"$work/build.log" 2>&1 || {
    tail -n 40 "$work/build.log"
    exit 1
}
"$cmake_exe" --install "$work/build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || {
    cat "$work/install.log"
    exit 1
}

echo "== -DRLOCK_BUILD_TESTS=ON without cmocka must fail"
if "$cmake_exe" -S "$src" -B "$work/build-tests" -DRLOCK_BUILD_TESTS=ON \
    -DRLOCK_BUILD_EXAMPLES=OFF -DRLOCK_BUILD_CLI=OFF >"$work/tests.log" 2>&1; then
    echo "user_build: the tests were configured without cmocka"
    exit 1
fi
grep -q cmocka "$work/tests.log" || {
    cat "$work/tests.log"
    exit 1
}
echo "user_build: OK"
