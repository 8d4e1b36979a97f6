/*
 * A cluster client routes every lock to the master of its name's slot: 200 names land on all
 * three masters and nowhere else; waits are woken across nodes (the subscriber listens on one
 * node, classic PUBLISH reaches all); every lock kind, a multi-lock over three nodes, semaphores
 * and the latch work;
 * seeds that are not a cluster are refused with the reason.
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
#include "tc_thread.h"

#define NAMES 200

static void test_locks_land_on_their_slot_owner(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    rlock *locks[NAMES];
    rh_server *owners[3] = {NULL, NULL, NULL};
    int n_owners = 0;
    for (int i = 0; i < NAMES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "route-%d", i);
        locks[i] = rlock_open(c, RLOCK_REENTRANT, name);
        assert_non_null(locks[i]);
        assert_int_equal(rlock_try_lock(locks[i], 0, 60000), RLOCK_OK);
        assert_int_equal(tc_cluster_exists(name), 1);
        rh_server *o = tc_cluster_owner(name);
        int seen = 0;
        for (int k = 0; k < n_owners; k++) {
            seen |= owners[k] == o;
        }
        if (!seen && n_owners < 3) {
            owners[n_owners++] = o;
        }
    }
    assert_int_equal(n_owners, 3);
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(rlock_is_locked(locks[i]), 1);
        assert_int_equal(rlock_unlock(locks[i]), RLOCK_OK);
        assert_int_equal(rlock_is_locked(locks[i]), 0);
        rlock_free(locks[i]);
    }
    rlock_client_free(c);
}

/* A lock taken and given back on a thread of its own (a reentrant hold is the thread's). */
static int lock_wait(void *arg)
{
    int r = rlock_try_lock(arg, 10000, 10000);
    return r == RLOCK_OK ? rlock_unlock(arg) : r;
}

/* A waiter on a lock of each master is woken by the holder's release. */
static void test_wait_is_woken_on_every_node(void **state)
{
    (void)state;
    rlock_client *a = tc_cluster_client(0);
    rlock_client *b = tc_cluster_client(0);
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "wake-", name, sizeof(name));
        rlock *la = rlock_open(a, RLOCK_REENTRANT, name);
        rlock *lb = rlock_open(b, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(la, 0, 30000), RLOCK_OK);
        tc_bg bg;
        tc_bg_start(&bg, lock_wait, lb);
        rh_sleep_ms(100);
        assert_int_equal(atomic_load(&bg.result), TC_BG_RUNNING);
        assert_int_equal(rlock_unlock(la), RLOCK_OK);
        /* Woken by the message, not by the lease (30 s) running out. */
        assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
        rlock_free(la);
        rlock_free(lb);
    }
    rlock_client_free(a);
    rlock_client_free(b);
}

static void test_every_kind_and_a_multi_lock(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    rlock_client *d = tc_cluster_client(0);
    rlock_client *e = tc_cluster_client(0);
    rlock *m[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "kind-", name, sizeof(name));
        rlock *fair = rlock_open(c, RLOCK_FAIR, name);
        assert_int_equal(rlock_try_lock(fair, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_unlock(fair), RLOCK_OK);
        rlock_free(fair);
        rlock *r1 = rlock_open(c, RLOCK_READ, name);
        rlock *r2 = rlock_open(d, RLOCK_READ, name);
        rlock *w = rlock_open(e, RLOCK_WRITE, name);
        assert_int_equal(rlock_try_lock(r1, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_try_lock(r2, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_try_lock(w, 0, 10000), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_unlock(r1), RLOCK_OK);
        assert_int_equal(rlock_unlock(r2), RLOCK_OK);
        assert_int_equal(rlock_try_lock(w, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_unlock(w), RLOCK_OK);
        rlock_free(r1);
        rlock_free(r2);
        rlock_free(w);
        m[i] = rlock_open(c, RLOCK_REENTRANT, name);
    }
    rlock *multi = rlock_multi_new(m, 3);
    assert_non_null(multi);
    assert_int_equal(rlock_try_lock(multi, 0, 10000), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "kind-", name, sizeof(name));
        assert_int_equal(tc_cluster_exists(name), 1);
    }
    assert_int_equal(rlock_unlock(multi), RLOCK_OK);
    rlock_free(multi);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
    rlock_client_free(c);
    rlock_client_free(d);
    rlock_client_free(e);
}

/* Semaphores (plain and leased permits) and the latch on a master of each slot range. */
static void test_semaphore_and_latch(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "sem-", name, sizeof(name));
        rlock_semaphore *sem = rlock_semaphore_open(c, name);
        assert_int_equal(rlock_semaphore_try_set_permits(sem, 2), 1);
        assert_int_equal(rlock_semaphore_acquire(sem, 2, 0), RLOCK_OK);
        assert_int_equal(rlock_semaphore_acquire(sem, 1, 0), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_semaphore_release(sem, 2), RLOCK_OK);
        assert_int_equal(rlock_semaphore_available(sem), 2);
        rlock_semaphore_free(sem);
        tc_cluster_name_on(i, "latch-", name, sizeof(name));
        rlock_latch *latch = rlock_latch_open(c, name);
        assert_int_equal(rlock_latch_try_set_count(latch, 1), 1);
        assert_int_equal(rlock_latch_count(latch), 1);
        assert_int_equal(rlock_latch_await(latch, 0), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_latch_count_down(latch), RLOCK_OK);
        assert_int_equal(rlock_latch_await(latch, 1000), RLOCK_OK);
        rlock_latch_free(latch);
    }
    rlock_client_free(c);
}

static void test_unreachable_seeds_refused(void **state)
{
    (void)state;
    rlock_options o;
    tc_options_url(&o, "redis-cluster://127.0.0.1:1,127.0.0.1:2");
    o.connect_timeout_ms = 500;
    rlock_client *c = NULL;
    assert_int_equal(rlock_client_new(&o, &c), RLOCK_ECONN);
    assert_null(c);
    assert_non_null(strstr(rlock_last_error(), "no cluster node answered"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locks_land_on_their_slot_owner),
        cmocka_unit_test(test_wait_is_woken_on_every_node),
        cmocka_unit_test(test_every_kind_and_a_multi_lock),
        cmocka_unit_test(test_semaphore_and_latch),
        cmocka_unit_test(test_unreachable_seeds_refused),
    };
    return cmocka_run_group_tests(tests, tc_cluster_setup, tc_cluster_teardown);
}
