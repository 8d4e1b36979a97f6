#!/bin/sh
# check_docs.sh SOURCE_DIR
# What README.md, docs/ and include/rlock.h owe a new user: one ACL rule list (docs/acl.md,
# which tests/core/test_acl_minimal.c runs), how long tests/run.sh takes
# and how to run part of it, where the examples are built and a usage line for each, and the
# bounds of semaphore permits and latch counts in the header comment of every call taking one.
# Used by the test docs_first_hour.
set -eu

src=$1
readme=$src/README.md
header=$src/include/rlock.h
failed=0
bad() {
    echo "check_docs: $*"
    failed=1
}

# The lock user's ACL rule list lives on docs/acl.md, and only there (the read-only viewer of
# `rlock top`, on docs/cli.md, has +evalsha_ro and no +evalsha).
n=$(cat "$readme" "$src"/docs/*.md | grep -cE -- '\+evalsha( |$)' || true)
[ "$n" -eq 1 ] || bad "README.md and docs/ have $n ACL rule lists (+evalsha), want one"
grep -q -- '+evalsha' "$src/docs/acl.md" || bad "docs/acl.md lacks the ACL rule list"
cat "$readme" "$src"/docs/*.md | grep -q 'Minimal ACL' && bad "a second, short ACL list is back"

grep -Eq 'about [0-9]+ minutes' "$readme" || bad "README.md does not say how long tests/run.sh takes"
for v in RLOCK_VARIANTS RLOCK_CTEST_ARGS; do
    grep -q "$v=" "$readme" || bad "README.md does not show $v"
done

grep -q 'build/examples/' "$readme" || bad "README.md does not say where examples are built"
for f in "$src"/examples/*.c; do
    name=$(basename "$f" .c)
    grep -q "^build/examples/$name " "$readme" || bad "README.md has no usage line for $name"
done
for f in "$src"/examples/*.sh; do
    name=$(basename "$f")
    grep -q "^examples/$name " "$readme" || bad "README.md has no usage line for $name"
done

# The comment block above each declaration must state the 2^31-1 bound.
for fn in rlock_semaphore_try_set_permits rlock_semaphore_add_permits rlock_semaphore_acquire \
    rlock_semaphore_release rlock_latch_try_set_count; do
    awk -v fn="$fn(" '
        /^\/\*/ { doc = "" }
        { doc = doc $0 "\n" }
        index($0, "RLOCK_EXPORT") && index($0, fn) { found = 1; ok = index(doc, "2^31-1") > 0 }
        END { exit(found && ok ? 0 : 1) }' "$header" || bad "rlock.h: $fn does not document its bound"
done

[ "$failed" -eq 0 ] && echo "check_docs: OK"
exit "$failed"
