#!/bin/sh
# first_example.sh README PREFIX WORK
# README's first example, cut out of README.md (its ```c block), compiled with the README's own
# command line ("cc ..." in the same section) against the rlock installed in PREFIX, then run
# with REDIS_URL as given in the environment and no LD_LIBRARY_PATH: it must find librlock
# (the rpath) and print its fencing token. Used by the test first_hour.
set -eu

readme=$1
prefix=$2
work=$3

section() { # the lines of README's "## First example" section
    awk '/^## First example/ { on = 1; next } /^## / { on = 0 } on' "$readme"
}
mkdir -p "$work/first"
section | awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' >"$work/first/first.c"
compile=$(section | grep '^cc ' | head -n 1)
if [ ! -s "$work/first/first.c" ] || [ -z "$compile" ]; then
    echo "first_example: README's first example has no C block or no cc line"
    exit 1
fi

pcfile=$(find "$prefix" -name rlock.pc | head -n 1)
PKG_CONFIG_PATH=$(dirname "$pcfile")
export PKG_CONFIG_PATH
unset LD_LIBRARY_PATH
echo "== $compile"
(cd "$work/first" && sh -c "$compile")
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
