/*
 * A user without the publish permission (ACL -publish): a release that happened reports success.
 * The release scripts delete the key first and publish last; publishing goes through redis.pcall,
 * so the refused PUBLISH no longer turns the whole release into RLOCK_EREDIS (and a retried unlock
 * into RLOCK_ELOST). Every single-key lock type, with a held count of two and then one, and three
 * full releases on one client: the refusal is logged at WARN exactly once per client, naming the
 * missing permission. The other publishing scripts (force releases, semaphore and latch) finish
 * too instead of failing halfway.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core_util.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* WARN lines that name the publish permission, of one client. */
static void count_log(int level, const char *msg, void *user_data)
{
    int *warnings = user_data;
    if (level == RLOCK_LOG_WARN && strstr(msg, "'publish'") != NULL) {
        (*warnings)++;
    }
}

/* A client of the user without publish, counting its warnings into *warnings (set to 0). */
static rlock_client *nopub_client(rh_server *s, int *warnings)
{
    rlock_options o;
    cu_opts(&o, s);
    *warnings = 0;
    o.log_fn = count_log;
    o.user_data = warnings;
    return tc_client_as(&o, s, "nopub", "nopub-pw");
}

static void check_kind(rh_server *s, rlock_kind kind)
{
    int warnings;
    rlock_client *c = nopub_client(s, &warnings);
    rlock *l = tc_open(c, kind, "acl-nopub");
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int r = rlock_unlock(l);
    print_message("kind %d: last release without publish -> %d (%s)\n", (int)kind, r,
                  r ? rlock_last_error() : "");
    assert_int_equal(r, RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    /* Three full releases refused to publish; the client said so once. A fair release publishes
     * only to a queued waiter, and there is none here (test_fair_waiter has one). */
    assert_int_equal(warnings, kind == RLOCK_FAIR ? 0 : 1);
    rlock_free(l);
    rlock_client_free(c);
}

static int fair_wait(void *arg)
{
    int r = rlock_try_lock(arg, 1500, 10000);
    return r == RLOCK_OK ? rlock_unlock(arg) : r;
}

/* A fair release notifies the queued waiter only: a waiter of another (full) user is queued. */
static void test_fair_waiter(void **state)
{
    rh_server *s = *state;
    int warnings;
    rlock_client *c = nopub_client(s, &warnings);
    rlock_options o;
    cu_opts(&o, s);
    rlock_client *full = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_FAIR, "acl-nopub-fairq");
    rlock *w = rlock_open(full, RLOCK_FAIR, "acl-nopub-fairq");
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, fair_wait, w);
    const char *llen[] = {"LLEN", "redisson_lock_queue:{acl-nopub-fairq}", NULL};
    for (int i = 0; i < 2000 && rh_cmd_int(s, llen) != 1; i++) {
        rh_sleep_ms(5);
    }
    assert_int_equal(rh_cmd_int(s, llen), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(warnings, 1);
    (void)tc_bg_join(&bg);
    rlock_free(w);
    rlock_free(l);
    rlock_client_free(full);
    rlock_client_free(c);
}

static void test_force_unlock(void **state)
{
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    int warnings;
    rlock_client *c = nopub_client(*state, &warnings);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        rlock *l = tc_open(c, kinds[i], "acl-nopub-force");
        assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
        int r = rlock_force_unlock(l);
        print_message("kind %d: force unlock without publish -> %d (%s)\n", (int)kinds[i], r,
                      r < 0 ? rlock_last_error() : "");
        assert_int_equal(r, 1);
        assert_int_equal(rlock_is_locked(l), 0);
        rlock_free(l);
    }
    assert_int_equal(warnings, 1);
    rlock_client_free(c);
}

static void test_semaphore_latch(void **state)
{
    int warnings;
    rlock_client *c = nopub_client(*state, &warnings);
    rlock_semaphore *sem = rlock_semaphore_open(c, "acl-nopub-sem");
    assert_non_null(sem);
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 2), 1);
    assert_int_equal(rlock_semaphore_acquire(sem, 2, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release(sem, 2), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(sem), 2);
    rlock_semaphore_free(sem);

    rlock_latch *latch = rlock_latch_open(c, "acl-nopub-latch");
    assert_non_null(latch);
    assert_int_equal(rlock_latch_try_set_count(latch, 1), 1);
    assert_int_equal(rlock_latch_count_down(latch), RLOCK_OK);
    assert_int_equal(rlock_latch_count(latch), 0);
    assert_int_equal(rlock_latch_await(latch, 0), RLOCK_OK);
    rlock_latch_free(latch);
    rlock_client_free(c);
}

/* The user that may do everything but publish. */
static int add_nopub_user(rh_server *s)
{
    const char *acl[] = {"ACL", "SETUSER", "nopub", "on",       ">nopub-pw",
                         "~*",  "&*",      "+@all", "-publish", NULL};
    char *r = rh_cmd_str(s, acl);
    if (r == NULL) {
        return -1;
    }
    free(r);
    return 0;
}

/* A fresh server of the test's own, with the user. */
static int nopub_server(void **state)
{
    int r = tc_server_setup(state);
    return r != 0 ? r : add_nopub_user(*state);
}

int main(void)
{
    const struct CMUnitTest others[] = {
        cmocka_unit_test_setup_teardown(test_fair_waiter, nopub_server, tc_server_teardown),
        cmocka_unit_test_setup_teardown(test_force_unlock, nopub_server, tc_server_teardown),
        cmocka_unit_test_setup_teardown(test_semaphore_latch, nopub_server, tc_server_teardown),
    };
    int failed = tc_run_per_kind("tests", check_kind, add_nopub_user);
    return failed + cmocka_run_group_tests(others, NULL, NULL);
}
