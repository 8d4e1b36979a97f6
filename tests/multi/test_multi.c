/*
 * Multi-lock scenarios against real redis-server processes: Redisson's RedissonMultiLockTest
 * (lock/unlock and isHeld, 10 threads with wait and lease timeouts, a second lock() waiting for
 * the first, locks on three separate servers), all-or-nothing checked on Redis, opposite-order
 * groups, leases, mixed lock kinds and bad input.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multi_util.h"
#include "tc_thread.h"

static rh_server *srv[3];
static rlock_client *cli[3];

static int setup(void **state)
{
    (void)state;
    return mu_start(srv, 3) == 0 && mu_clients(cli, srv, 3, 1500, 0) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    mu_close(cli, srv, 3);
    return 0;
}

/* A group over names on client c (one client) or on the three clients (c == NULL). */
typedef mu_group group;

static void group_open(group *gr, rlock_client *c, const char *prefix, size_t n)
{
    char name[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s%zu", prefix, i);
        gr->m[i] = tc_open(c != NULL ? c : cli[i % 3], RLOCK_REENTRANT, name);
    }
    mu_group_make(gr, n, rlock_multi_new);
}

/* RedissonMultiLockTest.testLockUnlock. */
static void test_lock_unlock(void **state)
{
    (void)state;
    group gr;
    group_open(&gr, cli[0], "lu", 3);
    assert_int_equal(rlock_is_held(gr.g), 0);
    assert_int_equal(rlock_is_locked(gr.g), 0);
    assert_int_equal(rlock_lock(gr.g, -1), RLOCK_OK);
    assert_int_equal(rlock_is_held(gr.g), 1);
    assert_int_equal(rlock_is_locked(gr.g), 1);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rlock_is_held(gr.m[i]), 1);
        assert_int_equal(mu_hlen(srv[0], i == 0 ? "lu0" : i == 1 ? "lu1" : "lu2"), 1);
    }
    /* Re-entry counts on every member. */
    assert_int_equal(rlock_lock(gr.g, -1), RLOCK_OK);
    assert_int_equal(rlock_hold_count(gr.m[1]), 2);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    assert_int_equal(rlock_is_held(gr.g), 1);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    assert_int_equal(rlock_is_held(gr.g), 0);
    assert_int_equal(mu_exists(srv[0], "lu0") + mu_exists(srv[0], "lu1") + mu_exists(srv[0], "lu2"),
                     0);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_ENOTOWNER);
    mu_group_close(&gr);
}

typedef struct race {
    rlock *g;
    int64_t wait_ms;
    pthread_barrier_t *start, *done;
    int rc;
} race;

static void *race_main(void *arg)
{
    race *r = arg;
    pthread_barrier_wait(r->start);
    r->rc = rlock_try_lock(r->g, r->wait_ms, 10000);
    pthread_barrier_wait(r->done); /* nobody unlocks before everyone tried */
    if (r->rc == RLOCK_OK) {
        r->rc = rlock_unlock(r->g) == RLOCK_OK ? RLOCK_OK : -100;
    }
    return NULL;
}

/* RedissonMultiLockTest.testWaitAndLeaseTimeouts: 10 threads, exactly one wins. */
static void race_round(int64_t wait_ms)
{
    group gr;
    group_open(&gr, NULL, wait_ms == 0 ? "race_a" : "race_b", 3);
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, 10);
    pthread_barrier_init(&done, NULL, 10);
    race r[10];
    pthread_t t[10];
    for (int i = 0; i < 10; i++) {
        r[i] = (race){gr.g, wait_ms, &start, &done, 0};
        pthread_create(&t[i], NULL, race_main, &r[i]);
    }
    int winners = 0, losers = 0;
    for (int i = 0; i < 10; i++) {
        pthread_join(t[i], NULL);
        winners += r[i].rc == RLOCK_OK;
        losers += r[i].rc == RLOCK_ETIMEDOUT;
    }
    assert_int_equal(winners, 1);
    assert_int_equal(losers, 9);
    assert_int_equal(rlock_is_locked(gr.g), 0);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    mu_group_close(&gr);
}

static void test_ten_threads_one_wins(void **state)
{
    (void)state;
    race_round(0);
    race_round(300);
}

/* RedissonMultiLockTest.testMultiThreads: a second lock() waits for the first. */
static void test_second_lock_waits(void **state)
{
    (void)state;
    group gr;
    group_open(&gr, NULL, "mt", 3);
    assert_int_equal(rlock_lock(gr.g, -1), RLOCK_OK);
    tc_holder s;
    tc_holder_start(&s, gr.g, -1, -1, 0);
    mu_sleep_ms(400);
    assert_int_equal(atomic_load(&s.got), 0);
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    assert_int_equal(tc_holder_join(&s), RLOCK_OK);
    assert_true(s.got_at >= released);
    assert_true(s.got_at - released < 1000); /* woken by the unlock, not by a lease */
    mu_group_close(&gr);
}

typedef struct trier {
    rlock *g;
    int rc[2];
} trier;

static void *trier_main(void *arg)
{
    trier *t = arg;
    t->rc[0] = rlock_try_lock(t->g, 0, -1);
    t->rc[1] = rlock_try_lock(t->g, 100, -1);
    for (int i = 0; i < 2; i++) {
        if (t->rc[i] == RLOCK_OK) {
            rlock_unlock(t->g);
        }
    }
    return NULL;
}

/* RedissonMultiLockTest.test: members on three separate servers. */
static void test_three_servers(void **state)
{
    (void)state;
    group gr;
    group_open(&gr, NULL, "three", 3);
    assert_int_equal(rlock_lock(gr.g, -1), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "three%d", i);
        assert_int_equal(mu_exists(srv[i], key), 1);
    }
    trier t = {gr.g, {0, 0}};
    pthread_t th;
    pthread_create(&th, NULL, trier_main, &t);
    pthread_join(th, NULL);
    assert_int_equal(t.rc[0], RLOCK_ETIMEDOUT);
    assert_int_equal(t.rc[1], RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    pthread_create(&th, NULL, trier_main, &t);
    pthread_join(th, NULL);
    assert_int_equal(t.rc[0], RLOCK_OK);
    mu_group_close(&gr);
}

/* One member held by another client: the group fails and leaves no hold of the caller. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    rlock_client *other = mu_client(rh_url(srv[0]), 0, 0);
    assert_non_null(other);
    group gr;
    group_open(&gr, cli[0], "aon", 3);
    rlock *busy = rlock_open(other, RLOCK_REENTRANT, "aon1");
    assert_int_equal(rlock_lock(busy, 20000), RLOCK_OK);
    for (int pass = 0; pass < 2; pass++) {
        int64_t t0 = rh_now_ms();
        int64_t lease = pass == 0 ? 10000 : -1;
        assert_int_equal(rlock_try_lock(gr.g, pass == 0 ? 0 : 300, lease), RLOCK_ETIMEDOUT);
        int64_t took = rh_now_ms() - t0;
        assert_true(pass == 0 || (took >= 300 && took < 1300));
        assert_int_equal(mu_exists(srv[0], "aon0"), 0);
        assert_int_equal(mu_exists(srv[0], "aon2"), 0);
        assert_int_equal(mu_hlen(srv[0], "aon1"), 1); /* only the other client's field */
        assert_int_equal(rlock_is_held(gr.g), 0);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(rlock_is_held(gr.m[i]), 0);
        }
    }
    /* Released elsewhere while the group waits for it: the group gets everything. */
    assert_int_equal(rlock_is_locked(gr.g), 1);
    assert_int_equal(rlock_unlock(busy), RLOCK_OK);
    assert_int_equal(rlock_try_lock(gr.g, 1000, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    rlock_free(busy);
    rlock_client_free(other);
    mu_group_close(&gr);
}

typedef struct opp {
    rlock *g;
    int iters, errors;
} opp;

static void *opp_main(void *arg)
{
    opp *o = arg;
    for (int i = 0; i < o->iters; i++) {
        if (rlock_lock(o->g, 10000) != RLOCK_OK || rlock_unlock(o->g) != RLOCK_OK) {
            o->errors++;
        }
    }
    return NULL;
}

/* Two groups over the same two locks in opposite orders, hammered by two threads each. */
static void test_opposite_orders(void **state)
{
    (void)state;
    rlock *a = rlock_open(cli[0], RLOCK_REENTRANT, "opp_a");
    rlock *b = rlock_open(cli[1], RLOCK_REENTRANT, "opp_b");
    rlock *ab[2] = {a, b}, *ba[2] = {b, a};
    rlock *g1 = rlock_multi_new(ab, 2), *g2 = rlock_multi_new(ba, 2);
    assert_non_null(g1);
    assert_non_null(g2);
    opp o[4] = {{g1, 150, 0}, {g2, 150, 0}, {g1, 150, 0}, {g2, 150, 0}};
    pthread_t t[4];
    int64_t t0 = rh_now_ms();
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, opp_main, &o[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(o[i].errors, 0);
    }
    assert_true(rh_now_ms() - t0 < 30000);
    assert_int_equal(mu_exists(srv[0], "opp_a") + mu_exists(srv[1], "opp_b"), 0);
    rlock_free(g1);
    rlock_free(g2);
    rlock_free(a);
    rlock_free(b);
}

/* lease > 0 applies to every member; unlocking after it ran out reports RLOCK_ELOST. */
static void test_lease(void **state)
{
    (void)state;
    group gr;
    group_open(&gr, NULL, "lease", 3);
    assert_int_equal(rlock_try_lock(gr.g, 0, 400), RLOCK_OK);
    const char *ttl[] = {"PTTL", "lease1", NULL};
    long long pttl = rh_cmd_int(srv[1], ttl);
    assert_true(pttl > 0 && pttl <= 400);
    mu_sleep_ms(600);
    assert_int_equal(rlock_is_locked(gr.g), 0);
    assert_int_equal(rlock_is_held(gr.g), 0);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_ELOST); /* the members' leases ran out */
    assert_int_equal(rlock_unlock(gr.g), RLOCK_ENOTOWNER);
    /* The watchdog keeps every member alive past its lease of 1.5 s. */
    assert_int_equal(rlock_lock(gr.g, -1), RLOCK_OK);
    mu_sleep_ms(2500);
    assert_int_equal(rlock_is_held(gr.g), 1);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    mu_group_close(&gr);
}

/* A sweep slower than the lease (the second member's server paused by CLIENT PAUSE for longer
 * than the lease) is undone: the group is never returned with a member already expired. */
static void test_sweep_outlasts_lease(void **state)
{
    (void)state;
    group gr;
    group_open(&gr, NULL, "sweep", 2); /* sweep0 on server 0, sweep1 on server 1 */
    const char *pause[] = {"CLIENT", "PAUSE", "400", "ALL", NULL};
    char *ok = rh_cmd_str(srv[1], pause);
    assert_string_equal(ok, "OK");
    free(ok);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(gr.g, 0, 250), RLOCK_ETIMEDOUT);
    assert_true(rh_now_ms() - t0 >= 350);
    assert_int_equal(mu_exists(srv[0], "sweep0") + mu_exists(srv[1], "sweep1"), 0);
    /* With wait time left the next round (a fast sweep) succeeds. */
    ok = rh_cmd_str(srv[1], pause);
    free(ok);
    assert_int_equal(rlock_try_lock(gr.g, 2000, 250), RLOCK_OK);
    assert_int_equal(rlock_is_held(gr.g), 1);
    assert_int_equal(rlock_unlock(gr.g), RLOCK_OK);
    mu_group_close(&gr);
}

/* Any kinds of members: a reentrant and a fair lock (and a write lock when available). */
static void test_mixed_kinds(void **state)
{
    (void)state;
    rlock *m[3];
    size_t n = 0;
    m[n++] = rlock_open(cli[0], RLOCK_REENTRANT, "mixed_r");
    rlock *fair = rlock_open(cli[1], RLOCK_FAIR, "mixed_f");
    if (fair != NULL) {
        m[n++] = fair;
    }
    rlock *w = rlock_open(cli[2], RLOCK_WRITE, "mixed_w");
    if (w != NULL) {
        m[n++] = w;
    }
    rlock *g = rlock_multi_new(m, n);
    assert_non_null(g);
    assert_int_equal(rlock_lock(g, -1), RLOCK_OK);
    assert_int_equal(rlock_is_held(g), 1);
    assert_int_equal(rlock_unlock(g), RLOCK_OK);
    assert_int_equal(rlock_is_locked(g), 0);
    rlock_free(g);
    for (size_t i = 0; i < n; i++) {
        rlock_free(m[i]);
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    rlock *a = rlock_open(cli[0], RLOCK_REENTRANT, "bad_a");
    rlock *dup[2] = {a, a}, *nul[2] = {a, NULL};
    assert_null(rlock_multi_new(NULL, 1));
    assert_null(rlock_multi_new(dup, 0));
    assert_null(rlock_multi_new(dup, 2));
    assert_string_not_equal(rlock_last_error(), "");
    assert_null(rlock_multi_new(nul, 2));
    rlock *g = rlock_multi_new(&a, 1);
    assert_non_null(g);
    rlock *nested[2] = {a, g};
    assert_null(rlock_multi_new(nested, 2));
    assert_int_equal(rlock_force_unlock(g), RLOCK_ENOTSUP);
    assert_int_equal(rlock_hold_count(g), RLOCK_ENOTSUP);
    assert_int_equal(RLOCK_TTL_CODE(rlock_remaining_ttl_ms(g)), RLOCK_ENOTSUP);
    assert_int_equal(rlock_token(g), 0);
    assert_int_equal(rlock_unlock(g), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_try_lock(g, -1, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_lock(g, 0), RLOCK_EINVAL);
    /* A member that is not held by this thread is not released by the group's failed unlock. */
    assert_int_equal(rlock_lock(a, 5000), RLOCK_OK);
    assert_int_equal(rlock_unlock(g), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_held(a), 1);
    assert_int_equal(rlock_unlock(a), RLOCK_OK);
    rlock_free(g);
    rlock_free(a);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_lock_unlock),
        cmocka_unit_test(test_ten_threads_one_wins), cmocka_unit_test(test_second_lock_waits),
        cmocka_unit_test(test_three_servers), cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_opposite_orders), cmocka_unit_test(test_lease),
        cmocka_unit_test(test_sweep_outlasts_lease), cmocka_unit_test(test_mixed_kinds),
        cmocka_unit_test(test_bad_input))
