#!/bin/sh
# first_example.sh README PREFIX WORK
# README's first example, cut out of README.md (its ```c block), compiled with the README's own
# lines (its "export PKG_CONFIG_PATH=" and "cc ..." lines) against the rlock installed in PREFIX,
# then run with REDIS_URL as given in the environment and no LD_LIBRARY_PATH: it must find
# librlock (the rpath) and print its fencing token. Used by the test first_hour.
set -eu

readme=$1
prefix=$2
work=$3

section() { # the lines of README's "## First example" section
    awk '/^## First example/ { on = 1; next } /^## / { on = 0 } on' "$readme"
}
mkdir -p "$work/first"
section | awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' >"$work/first/first.c"
pcpath=$(section | grep '^export PKG_CONFIG_PATH=' | head -n 1)
compile=$(section | grep '^cc ' | head -n 1)
if [ ! -s "$work/first/first.c" ] || [ -z "$pcpath" ] || [ -z "$compile" ]; then
    echo "first_example: README's first example lacks its C block, PKG_CONFIG_PATH or cc line"
    exit 1
fi

# README's lines as written, PREFIX being where user_build.sh installed rlock.
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
echo "== PREFIX=$prefix; $pcpath; $compile"
(cd "$work/first" && PREFIX=$prefix sh -c "$pcpath && $compile")
echo "== REDIS_URL=$REDIS_URL ./first"
out=$(cd "$work/first" && ./first 2>&1) || {
    echo "$out"
    echo "first_example: the example failed"
    exit 1
}
echo "$out"
echo "$out" | grep -q '^fencing token [1-9][0-9]*$' || {
    echo "first_example: no fencing token printed"
    exit 1
}
echo "first_example: OK"
