/*
 * Drain, set permits, lease updates, release-if-exists, total and leased counts, several leased
 * permits per call, trySetPermits with a TTL, remaining leases, and latch deletes on a real
 * redis-server: the counts they leave on Redis (Redisson's data), the waiters set_permits wakes,
 * the watchdog renewals update_lease stops, and RLOCK_EINVAL / RLOCK_ENOTOWNER for bad input
 * with nothing written.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "tc_redis.h"

static rh_server *srv;
static rlock_client *client;
TC_FIXTURE(srv, client, NULL)

/* GET key as a number (-999 when the key is missing). */
static long long get_count(const char *key)
{
    const char *argv[] = {"GET", key, NULL};
    char *v = rh_cmd_str(srv, argv);
    long long n = v ? atoll(v) : -999;
    free(v);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_drain(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:drain");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_drain(s), 0); /* never set: nothing written */
    assert_int_equal(get_count("ops:drain"), -999);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 5), 1);
    assert_int_equal(rlock_semaphore_acquire(s, 2, 0), RLOCK_OK);
    const char *expire[] = {"PEXPIRE", "ops:drain", "100000", NULL};
    assert_int_equal(rh_cmd_int(srv, expire), 1);
    assert_int_equal(rlock_semaphore_drain(s), 3);
    assert_int_equal(get_count("ops:drain"), 0);
    const char *pttl[] = {"PTTL", "ops:drain", NULL};
    assert_int_equal(rh_cmd_int(srv, pttl), -1); /* a SET, as Redisson's: the TTL is gone */
    assert_int_equal(rlock_semaphore_drain(s), 0);
    /* Below 0 after a negative add: set to 0 as by Redisson, and no permit taken. */
    assert_int_equal(rlock_semaphore_add_permits(s, -4), RLOCK_OK);
    assert_int_equal(get_count("ops:drain"), -4);
    assert_int_equal(rlock_semaphore_drain(s), 0);
    assert_int_equal(get_count("ops:drain"), 0);
    assert_int_equal(rlock_semaphore_drain(NULL), RLOCK_EINVAL);
    rlock_semaphore_free(s);
}

static void test_set_permits(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:set");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_set_permits(s, 4), RLOCK_OK); /* never set: SET */
    assert_int_equal(get_count("ops:set"), 4);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 3);
    /* The total counts the leased permit: 10 in all leaves 9 available. */
    assert_int_equal(rlock_semaphore_set_permits(s, 10), RLOCK_OK);
    assert_int_equal(get_count("ops:set"), 9);
    assert_int_equal(rlock_semaphore_set_permits(s, 10), RLOCK_OK);
    assert_int_equal(get_count("ops:set"), 9);
    assert_int_equal(rlock_semaphore_set_permits(s, 0), RLOCK_OK);
    assert_int_equal(get_count("ops:set"), -1);
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(get_count("ops:set"), 0);
    rlock_semaphore_free(s);
}

static void test_set_permits_bad_input(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:setbad");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_set_permits(NULL, 1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_set_permits(s, -1), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "2147483647"));
    assert_int_equal(rlock_semaphore_set_permits(s, INT64_C(2147483648)), RLOCK_EINVAL);
    assert_int_equal(get_count("ops:setbad"), -999); /* nothing written */
    rlock_semaphore_free(s);
}

typedef struct waiter {
    rlock_semaphore *s;
    int r;
} waiter;

static void *acquire_one(void *arg)
{
    waiter *w = arg;
    w->r = rlock_semaphore_acquire(w->s, 1, 10000);
    return NULL;
}

/* A waiter on a semaphore without permits is woken by set_permits, not by its wait bound. */
static void test_set_permits_wakes(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:wake");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 0), 1);
    waiter w = {s, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_one, &w), 0);
    assert_int_equal(tc_wait_numsub(srv, "redisson_sc:{ops:wake}", 1, 5000), 1);
    sleep_ms(100);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_semaphore_set_permits(s, 1), RLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.r, RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 2000);
    assert_int_equal(get_count("ops:wake"), 0);
    rlock_semaphore_free(s);
}

static void test_update_lease(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:lease");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 1000, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 60000), RLOCK_OK);
    sleep_ms(1300); /* past the first lease: the permit is still held */
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 300), RLOCK_OK);
    sleep_ms(500); /* past the shortened lease: the permit is back */
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 1000), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ENOTOWNER);
    rlock_semaphore_free(s);
}

/* A watchdog permit given a lease keeps that lease: the watchdog stops renewing it. */
static void test_update_lease_stops_watchdog(void **state)
{
    (void)state;
    rlock_client *c = tc_client_tuned(srv, 600, 0, NULL, NULL);
    rlock_semaphore *s = rlock_semaphore_open(c, "ops:wd");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, id), RLOCK_OK);
    sleep_ms(1000); /* renewed past its 600 ms lease */
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 500), RLOCK_OK);
    sleep_ms(1200); /* renewed, it would still be held */
    assert_int_equal(rlock_semaphore_available(s), 1);
    rlock_semaphore_free(s);
    rlock_client_free(c);
}

static void test_update_lease_bad_input(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:leasebad");
    assert_non_null(s);
    const char *id = "0123456789abcdef0123456789abcdef";
    assert_int_equal(rlock_semaphore_update_lease(NULL, id, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, NULL, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, "xyz", 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, "0123456789abcdef0123456789abcdeg", 1000),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, id, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, id, RLOCK_MAX_DURATION_MS + 1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease(s, id, 1000), RLOCK_ENOTOWNER);
    assert_int_equal(get_count("ops:leasebad"), -999); /* nothing written */
    rlock_semaphore_free(s);
}

static void test_release_if_exists(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:rie");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_release_if_exists(s, 2), 0); /* never set: nothing written */
    assert_int_equal(get_count("ops:rie"), -999);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 0), 1);
    assert_int_equal(rlock_semaphore_release_if_exists(s, 2), 1);
    assert_int_equal(get_count("ops:rie"), 2);
    assert_int_equal(rlock_semaphore_release_if_exists(NULL, 1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_if_exists(s, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_if_exists(s, INT64_C(2147483648)), RLOCK_EINVAL);
    assert_int_equal(get_count("ops:rie"), 2);
    rlock_semaphore_free(s);
}

static void test_permits_and_acquired(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:total");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_permits(s), 0);
    assert_int_equal(rlock_semaphore_acquired(s), 0);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 4), 1);
    char a[RLOCK_PERMIT_ID_LEN + 1], b[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, a), RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 1000, b), RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_OK); /* plain: not in the total */
    assert_int_equal(rlock_semaphore_permits(s), 3);
    assert_int_equal(rlock_semaphore_acquired(s), 2);
    sleep_ms(1200); /* b's lease runs out: back in the pool, still in the total */
    assert_int_equal(rlock_semaphore_acquired(s), 1);
    assert_int_equal(get_count("ops:total"), 2);
    assert_int_equal(rlock_semaphore_permits(s), 3);
    assert_int_equal(rlock_semaphore_permits(NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquired(NULL), RLOCK_EINVAL);
    rlock_semaphore_free(s);
}

static void test_latch_delete(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(client, "ops:latch");
    assert_non_null(l);
    assert_int_equal(rlock_latch_delete(l), 0);
    assert_int_equal(rlock_latch_try_set_count(l, 3), 1);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_ETIMEDOUT);
    assert_int_equal(tc_numsub(srv, "redisson_countdownlatch__channel__{ops:latch}"), 0);
    assert_int_equal(rlock_latch_delete(l), 1);
    assert_int_equal(get_count("ops:latch"), -999);
    assert_int_equal(rlock_latch_count(l), 0);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_OK);
    assert_int_equal(rlock_latch_try_set_count(l, 2), 1); /* counts again from scratch */
    assert_int_equal(rlock_latch_count(l), 2);
    assert_int_equal(rlock_latch_delete(NULL), RLOCK_EINVAL);
    rlock_latch_free(l);
}

/* Several leased permits in one call: all or none, each id its own permit. */
static void test_leased_n(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:n");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 4), 1);
    char ids[3][RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 3, 0, 60000, ids), RLOCK_OK);
    assert_string_not_equal(ids[0], ids[1]);
    assert_string_not_equal(ids[1], ids[2]);
    assert_int_equal(rlock_semaphore_acquired(s), 3);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 2, 0, 60000, ids), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_semaphore_available(s), 1); /* none taken */
    const char *rel[] = {ids[0], ids[1], ids[2], ids[0]};
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, 4), 3);
    assert_int_equal(rlock_semaphore_available(s), 4);
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, 1), 0);
    rlock_semaphore_free(s);
}

/* Watchdog permits taken together are all renewed past their lease. */
static void test_leased_n_watchdog(void **state)
{
    (void)state;
    rlock_client *c = tc_client_tuned(srv, 600, 0, NULL, NULL);
    rlock_semaphore *s = rlock_semaphore_open(c, "ops:nwd");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    char ids[2][RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 2, 0, -1, ids), RLOCK_OK);
    sleep_ms(1000); /* renewed past their 600 ms lease */
    assert_int_equal(rlock_semaphore_acquired(s), 2);
    const char *rel[] = {ids[0], ids[1]};
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, 2), 2);
    assert_int_equal(rlock_semaphore_available(s), 2);
    rlock_semaphore_free(s);
    rlock_client_free(c);
}

static void test_leased_n_bad_input(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:nbad");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 20), 1);
    char ids[RLOCK_PERMIT_IDS_MAX + 1][RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased_n(NULL, 1, 0, 1000, ids), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 0, 0, 1000, ids), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, RLOCK_PERMIT_IDS_MAX + 1, 0, 1000, ids),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 1, 0, 1000, NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 1, 0, 0, ids), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 1, -1, 1000, ids), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_available(s), 20); /* nothing taken */
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, RLOCK_PERMIT_IDS_MAX, 0, 60000, ids),
                     RLOCK_OK);
    const char *rel[RLOCK_PERMIT_IDS_MAX + 1];
    for (int i = 0; i < RLOCK_PERMIT_IDS_MAX; i++) {
        rel[i] = ids[i];
    }
    rel[RLOCK_PERMIT_IDS_MAX] = ids[0];
    assert_int_equal(rlock_semaphore_release_leased_n(NULL, rel, 1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased_n(s, NULL, 1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, RLOCK_PERMIT_IDS_MAX + 1),
                     RLOCK_EINVAL);
    const char *bad[] = {ids[0], "xyz"};
    assert_int_equal(rlock_semaphore_release_leased_n(s, bad, 2), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquired(s), RLOCK_PERMIT_IDS_MAX); /* none released */
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, RLOCK_PERMIT_IDS_MAX),
                     RLOCK_PERMIT_IDS_MAX);
    rlock_semaphore_free(s);
}

static void test_try_set_ttl(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:ttl");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(NULL, 1, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, -1, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, INT64_C(2147483648), 1000),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 1, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 1, RLOCK_MAX_DURATION_MS + 1),
                     RLOCK_EINVAL);
    assert_int_equal(get_count("ops:ttl"), -999); /* nothing written */
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 3, 1000), 1);
    const char *pttl[] = {"PTTL", "ops:ttl", NULL};
    long long left = rh_cmd_int(srv, pttl);
    assert_true(left > 0 && left <= 1000);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 5, 60000), 0);
    assert_int_equal(rlock_semaphore_available(s), 3);
    sleep_ms(1200); /* the counter ran out: never set again */
    assert_int_equal(get_count("ops:ttl"), -999);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    assert_int_equal(rh_cmd_int(srv, pttl), -1);
    rlock_semaphore_free(s);
}

static void test_remaining_lease(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "ops:left");
    assert_non_null(s);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    int64_t left = 0;
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, id, &left), RLOCK_OK);
    assert_true(left > 55000 && left <= 60000);
    /* A permit without expiry, as Redisson takes one without a lease. */
    const char *noexp[] = {"ZADD", "{ops:left}:timeout", "922337203685477", "0123456789abcdef",
                           NULL};
    assert_int_equal(rh_cmd_int(srv, noexp), 1);
    assert_int_equal(
        rlock_semaphore_remaining_lease_ms(s, "30313233343536373839616263646566", &left), RLOCK_OK);
    assert_int_equal(left, -1);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, id, &left), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(NULL, id, &left), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, NULL, &left), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, "xyz", &left), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, id, NULL), RLOCK_EINVAL);
    rlock_semaphore_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_set_permits),
        cmocka_unit_test(test_set_permits_bad_input),
        cmocka_unit_test(test_set_permits_wakes),
        cmocka_unit_test(test_update_lease),
        cmocka_unit_test(test_update_lease_stops_watchdog),
        cmocka_unit_test(test_update_lease_bad_input),
        cmocka_unit_test(test_release_if_exists),
        cmocka_unit_test(test_permits_and_acquired),
        cmocka_unit_test(test_latch_delete),
        cmocka_unit_test(test_leased_n),
        cmocka_unit_test(test_leased_n_watchdog),
        cmocka_unit_test(test_leased_n_bad_input),
        cmocka_unit_test(test_try_set_ttl),
        cmocka_unit_test(test_remaining_lease),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
