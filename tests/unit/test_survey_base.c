/*
 * rlk_survey_base() (src/locks/survey.c): which name each key that `rlock top`'s SCAN finds
 * stands for. Redisson's and rlock's auxiliary keys are shown as part of their object, so they
 * must map to its name (or to nothing), while a user's own names, hash-tagged ones included,
 * stand for themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "survey.h"

/* key -> the name it stands for ("" = nothing). */
static const char *const cases[][2] = {
    {"app:x", "app:x"},
    {"{tenant1}:jobs", "{tenant1}:jobs"}, /* a user's hash-tagged name */
    {"jobs:timeout", "jobs:timeout"},
    {"{tag}x", "{tag}x"},
    {"redisson_lock_queue:{app:x}", "app:x"},
    {"redisson_lock_timeout:{app:x}", "app:x"},
    {"redisson_lock_token:{app:x}", "app:x"},
    {"rlock_rwlock_writers:{app:x}", "app:x"},
    {"rlock_lock_waiters:{app:x}", "app:x"},
    {"rlock_lock_waiters:{app:x}:grants", "app:x"},
    {"rlock_lock_wake:{app:x}", "app:x"},
    {"redisson_lock_queue:{tag}x", "{tag}x"}, /* the derived key of a tagged name */
    {"redisson_countdownlatch__channel__{app:x}", "app:x"},
    {"{app:x}:rlock_request:0123456789abcdef0123456789abcdef", "app:x"},
    {"{app:x}:rlock_once", "app:x"},
    {"{app:x}:rlock_election", "app:x"},
    {"{app:x}:5b0e7a2c-1111-4222-8333-944445555666:17:rwlock_timeout", "app:x"},
    {"{app:x}:5b0e7a2c-1111-4222-8333-944445555666:17:rwlock_timeout:2", "app:x"},
    {"{tag}x:rlock_request:0123", "{tag}x"},
    {"{tag}x:5b0e7a2c-1111-4222-8333-944445555666:3:rwlock_timeout:1", "{tag}x"},
    {"redisson_lock_queue:", "redisson_lock_queue:"}, /* nothing after the prefix: a name */
    {":rlock_once", ""},
    {"redisson_lock_token:{}", "{}"}, /* the name "{}" (a brace: no wrapping) */
};

static void test_survey_base(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *key = cases[i][0], *want = cases[i][1];
        const char *base = NULL;
        size_t blen = 0;
        int r = rlk_survey_base(key, strlen(key), &base, &blen);
        if (want[0] == '\0') {
            if (r != 0) {
                fail_msg("%s stands for '%.*s', expected nothing", key, (int)blen, base);
            }
            continue;
        }
        if (r != 1 || blen != strlen(want) || memcmp(base, want, blen) != 0) {
            fail_msg("%s stands for '%.*s' (%d), expected '%s'", key, (int)blen, base ? base : "",
                     r, want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_survey_base)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
