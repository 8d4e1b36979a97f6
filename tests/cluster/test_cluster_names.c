/*
 * Names holding braces on a cluster client and on a standalone client. On a cluster every key
 * and channel of one lock must share the name's slot; a name whose derived names would not is
 * refused at open time with RLOCK_EINVAL (every lock kind, the semaphore, the latch, inspect),
 * while names without braces or with a hash tag work. A standalone client takes them all.
 * Each name serves the lock kinds, inspect and the latch (none leaves a key) before the semaphore.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tc_cluster.h"
#include "tc_redis.h"

/* The names of issue 26: a brace that is not a hash tag, and two more of the same kind. */
static const char *const odd_names[] = {"{}e", "{", "}{", "a{b", "x{}y{z}", "}", "a}b"};
#define N_ODD (sizeof(odd_names) / sizeof(odd_names[0]))

/* Names whose derived keys share the name's slot: no brace, or a hash tag. */
static const char *const tagged_names[] = {"plain-name", "{t1}x", "a{t2}b", "}{t3}", "{t4}{"};
#define N_TAGGED (sizeof(tagged_names) / sizeof(tagged_names[0]))

static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};

/* The latch wraps its name in braces for its channel whatever the name holds (Redisson's
 * redisson_countdownlatch__channel__{name}), so a name without '}' is safe for it. */
static int latch_name_ok(const char *name)
{
    return strchr(name, '}') == NULL;
}

static void use_lock(rlock_client *c, rlock_kind kind, const char *name)
{
    rlock *l = rlock_open(c, kind, name);
    if (l == NULL) {
        fail_msg("open %s (kind %d): %s", name, (int)kind, rlock_last_error());
    }
    int r = rlock_try_lock(l, 0, 10000);
    if (r != RLOCK_OK) {
        fail_msg("lock %s (kind %d): %s", name, (int)kind, rlock_last_error());
    }
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
}

static void use_semaphore(rlock_client *c, const char *name)
{
    rlock_semaphore *s = rlock_semaphore_open(c, name);
    if (s == NULL) {
        fail_msg("open semaphore %s: %s", name, rlock_last_error());
    }
    assert_true(rlock_semaphore_try_set_permits(s, 2) >= 0);
    int r = rlock_semaphore_acquire(s, 1, 0);
    if (r != RLOCK_OK) {
        fail_msg("acquire %s: %s", name, rlock_last_error());
    }
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    r = rlock_semaphore_acquire_leased(s, 0, 10000, id);
    if (r != RLOCK_OK) {
        fail_msg("acquire_leased %s: %s", name, rlock_last_error());
    }
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2);
    rlock_semaphore_free(s);
}

static void use_latch(rlock_client *c, const char *name)
{
    rlock_latch *l = rlock_latch_open(c, name);
    if (l == NULL) {
        fail_msg("open latch %s: %s", name, rlock_last_error());
    }
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_ETIMEDOUT);
    int r = rlock_latch_count_down(l);
    if (r != RLOCK_OK) {
        fail_msg("count_down %s: %s", name, rlock_last_error());
    }
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_OK);
    rlock_latch_free(l);
}

static void use_inspect(rlock_client *c, const char *name)
{
    rlock_lock_info *info = NULL;
    int r = rlock_inspect(c, name, &info);
    if (r != RLOCK_OK) {
        fail_msg("inspect %s: %s", name, rlock_last_error());
    }
    rlock_lock_info_free(info);
}

/* The open was refused (NULL) with a message that names the name, the cluster and the slot. */
static void assert_refused(const void *handle, const char *name, const char *what)
{
    if (handle != NULL) {
        fail_msg("%s %s was opened on a cluster client", what, name);
    }
    const char *msg = rlock_last_error();
    if (strstr(msg, name) == NULL || strstr(msg, "cluster") == NULL ||
        strstr(msg, "slot") == NULL) {
        fail_msg("%s %s: unclear message: %s", what, name, msg);
    }
}

static void test_cluster_refuses_odd_names(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    for (size_t i = 0; i < N_ODD; i++) {
        const char *name = odd_names[i];
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            assert_refused(rlock_open(c, kinds[k], name), name, "lock");
        }
        assert_refused(rlock_semaphore_open(c, name), name, "semaphore");
        rlock_lock_info *info = NULL;
        assert_int_equal(rlock_inspect(c, name, &info), RLOCK_EINVAL);
        assert_null(info);
        if (latch_name_ok(name)) {
            use_latch(c, name);
        } else {
            assert_refused(rlock_latch_open(c, name), name, "latch");
        }
    }
    rlock_client_free(c);
}

static void test_cluster_takes_tagged_names(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    for (size_t i = 0; i < N_TAGGED; i++) {
        const char *name = tagged_names[i];
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            use_lock(c, kinds[k], name);
        }
        use_inspect(c, name);
        if (latch_name_ok(name)) {
            use_latch(c, name);
        } else {
            assert_refused(rlock_latch_open(c, name), name, "latch");
        }
        use_semaphore(c, name);
    }
    rlock_client_free(c);
}

/* A standalone server has one slot space: every name works for every type. */
static void test_standalone_takes_every_name(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    rlock_options o;
    tc_options(&o, s);
    rlock_client *c = tc_client(&o);
    for (size_t i = 0; i < N_ODD + N_TAGGED; i++) {
        const char *name = i < N_ODD ? odd_names[i] : tagged_names[i - N_ODD];
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            use_lock(c, kinds[k], name);
        }
        use_inspect(c, name);
        use_latch(c, name);
        use_semaphore(c, name);
    }
    rlock_client_free(c);
    rh_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_refuses_odd_names),
        cmocka_unit_test(test_cluster_takes_tagged_names),
        cmocka_unit_test(test_standalone_takes_every_name),
    };
    return cmocka_run_group_tests(tests, tc_cluster_setup, tc_cluster_teardown);
}
