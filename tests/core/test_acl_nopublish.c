/*
 * A user without the publish permission (ACL -publish): a release that happened reports success.
 * The release scripts delete the key first and publish last; publishing goes through redis.pcall,
 * so the refused PUBLISH no longer turns the whole release into RLOCK_EREDIS (and a retried unlock
 * into RLOCK_ELOST). Every single-key lock type, with a held count of two and then one, and three
 * full releases on one client: the refusal is logged at WARN exactly once per client, naming the
 * missing permission. The other publishing scripts (force releases, semaphore and latch) finish
 * too instead of failing halfway.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core_util.h"
#include "tc_redis.h"

typedef struct nopub_log {
    int warnings; /* WARN lines that name the publish permission */
    char url[128];
} nopub_log;

static void count_log(int level, const char *msg, void *user_data)
{
    nopub_log *log = user_data;
    if (level == RLOCK_LOG_WARN && strstr(msg, "'publish'") != NULL) {
        log->warnings++;
    }
}

/* A client of the user without publish, logging into log (its warning count starts at 0). */
static rlock_client *nopub_client(rh_server *s, nopub_log *log)
{
    rlock_options o;
    memset(log, 0, sizeof(*log));
    snprintf(log->url, sizeof(log->url), "redis://nopub:nopub-pw@127.0.0.1:%d", rh_port(s));
    cu_opts(&o, s);
    o.url = log->url;
    o.log_fn = count_log;
    o.user_data = log;
    return tc_client(&o);
}

static void check_kind(rh_server *s, rlock_kind kind)
{
    nopub_log log;
    rlock_client *c = nopub_client(s, &log);
    rlock *l = rlock_open(c, kind, "acl-nopub");
    assert_non_null(l);
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
    assert_int_equal(log.warnings, kind == RLOCK_FAIR ? 0 : 1);
    rlock_free(l);
    rlock_client_free(c);
}

static void *fair_waiter(void *arg)
{
    rlock *w = arg;
    int r = rlock_try_lock(w, 1500, 10000);
    if (r == RLOCK_OK) {
        (void)rlock_unlock(w);
    }
    return NULL;
}

/* A fair release notifies the queued waiter only: a waiter of another (full) user is queued. */
static void test_fair_waiter(void **state)
{
    rh_server *s = *state;
    nopub_log log;
    rlock_client *c = nopub_client(s, &log);
    rlock_options o;
    cu_opts(&o, s);
    rlock_client *full = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_FAIR, "acl-nopub-fairq");
    rlock *w = rlock_open(full, RLOCK_FAIR, "acl-nopub-fairq");
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fair_waiter, w), 0);
    const char *llen[] = {"LLEN", "redisson_lock_queue:{acl-nopub-fairq}", NULL};
    for (int i = 0; i < 200 && rh_cmd_int(s, llen) != 1; i++) {
        rh_sleep_ms(5);
    }
    assert_int_equal(rh_cmd_int(s, llen), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(log.warnings, 1);
    pthread_join(t, NULL);
    rlock_free(w);
    rlock_free(l);
    rlock_client_free(full);
    rlock_client_free(c);
}

static void test_force_unlock(void **state)
{
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    nopub_log log;
    rlock_client *c = nopub_client(*state, &log);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        rlock *l = rlock_open(c, kinds[i], "acl-nopub-force");
        assert_non_null(l);
        assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
        int r = rlock_force_unlock(l);
        print_message("kind %d: force unlock without publish -> %d (%s)\n", (int)kinds[i], r,
                      r < 0 ? rlock_last_error() : "");
        assert_int_equal(r, 1);
        assert_int_equal(rlock_is_locked(l), 0);
        rlock_free(l);
    }
    assert_int_equal(log.warnings, 1);
    rlock_client_free(c);
}

static void test_semaphore_latch(void **state)
{
    nopub_log log;
    rlock_client *c = nopub_client(*state, &log);
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

static void test_reentrant(void **state)
{
    check_kind(*state, RLOCK_REENTRANT);
}

static void test_fair(void **state)
{
    check_kind(*state, RLOCK_FAIR);
}

static void test_read(void **state)
{
    check_kind(*state, RLOCK_READ);
}

static void test_write(void **state)
{
    check_kind(*state, RLOCK_WRITE);
}

static int setup_server(void **state)
{
    rh_server *s = cu_start(NULL);
    *state = s;
    if (s == NULL) {
        return -1;
    }
    const char *acl[] = {"ACL", "SETUSER", "nopub", "on",       ">nopub-pw",
                         "~*",  "&*",      "+@all", "-publish", NULL};
    char *r = rh_cmd_str(s, acl);
    if (r == NULL) {
        return -1;
    }
    free(r);
    return 0;
}

static int teardown_server(void **state)
{
    rh_free(*state);
    return 0;
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant),
        cmocka_unit_test(test_fair),
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_fair_waiter),
        cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_semaphore_latch),
    };
    return cmocka_run_group_tests(tests, setup_server, teardown_server);
}
