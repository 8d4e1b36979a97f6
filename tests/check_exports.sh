#!/bin/sh
# check_exports.sh LIB EXPECTED
# Compares the global function/data symbols that shared library LIB defines
# in its dynamic symbol table with the sorted list in EXPECTED (one name a
# line). Exit 0 when equal, 1 (with a diff) when not, 77 when nm is missing.
set -eu

lib=$1
expected=$2

if ! command -v nm >/dev/null 2>&1; then
    echo "nm not found (binutils): skipped"
    exit 77
fi
if [ ! -f "$lib" ]; then
    echo "$lib does not exist (library not built)" >&2
    exit 1
fi

actual=$(mktemp)
want=$(mktemp)
trap 'rm -f "$actual" "$want"' EXIT

# Defined globals: T/t text, D/d data, B/b bss, R/r rodata, V/W weak, u unique,
# i indirect. Linker-provided section markers are not part of the API.
nm -D --defined-only "$lib" \
    | awk 'NF >= 3 && $2 ~ /^[TDBRVWui]$/ { print $3 }' \
    | sed 's/@.*//' \
    | grep -v -x -e _init -e _fini -e _edata -e _end -e __bss_start \
    | LC_ALL=C sort -u >"$actual" || true
grep -v -e '^[[:space:]]*$' -e '^#' "$expected" | LC_ALL=C sort -u >"$want"

if diff -u "$want" "$actual"; then
    echo "exported symbols OK ($(wc -l <"$actual") symbols)"
    exit 0
fi
echo "exported symbols of $lib differ from $expected (- expected, + actual)" >&2
exit 1
