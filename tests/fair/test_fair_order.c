/*
 * Strict FIFO of the fair lock, across threads, clients and processes, against a real
 * redis-server:
 *  - Redisson's testLeaseTimeout: 8 threads start 100 ms apart, try_lock(10 s wait, 1 s lease),
 *    never unlock: they acquire in start order as each lease runs out.
 *  - Redisson's testConcurrency_MultiInstance_Ordering, made deterministic: 8 threads on 4
 *    clients join one after the other (each once the previous one is visibly queued) and acquire
 *    in join order.
 *  - Redisson's testMultipleLocks (#2883): 500 threads lock(5 s lease)/sleep/unlock all finish.
 *    The sleep is scaled from 200 ms to 5 ms (2 ms under TSan) so the run stays short; what is
 *    tested is that a 500-deep queue drains completely with exact mutual exclusion.
 *  - The FIFO test: 50 waiters in 4 processes join in a known order; after the release
 *    the acquisition order equals the join order (0 inversions), 20 repetitions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "tc_thread.h"

static rh_server *g_srv;
static rlock_client *g_client;

TC_FIXTURE(g_srv, g_client, NULL)

/* ---- lease timeout ordering --------------------------------------------------------------- */

static atomic_int g_next_slot;

typedef struct lease_waiter {
    rlock *l;
    int index;
    int64_t start_at;
    int rc;
    int slot; /* position in acquisition order */
} lease_waiter;

static void *lease_main(void *arg)
{
    lease_waiter *w = arg;
    int64_t now = rh_now_ms();
    if (w->start_at > now) {
        rh_sleep_ms(w->start_at - now);
    }
    w->rc = rlock_try_lock(w->l, 10000, 1000);
    w->slot = atomic_fetch_add(&g_next_slot, 1);
    return NULL;
}

static void test_lease_timeout_order(void **state)
{
    (void)state;
    enum { N = 8 };
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:lease-order");
    lease_waiter w[N];
    pthread_t t[N];
    atomic_store(&g_next_slot, 0);
    int64_t t0 = rh_now_ms() + 50;
    for (int i = 0; i < N; i++) {
        w[i] = (lease_waiter){l, i, t0 + 100 * i, -1000, -1};
        assert_int_equal(pthread_create(&t[i], NULL, lease_main, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
    }
    print_message("8 threads, 1 s leases never released: all acquired after %lld ms\n",
                  (long long)(rh_now_ms() - t0));
    for (int i = 0; i < N; i++) {
        print_message("waiter %d: rc %d, acquired as #%d\n", i, w[i].rc, w[i].slot);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, RLOCK_OK);
        assert_int_equal(w[i].slot, i);
    }
    FC_ASSERT_NO_WAITERS(g_srv, "fair:lease-order");
    rlock_free(l);
}

/* ---- multi-instance ordering -------------------------------------------------------------- */

static void test_multi_instance_order(void **state)
{
    (void)state;
    enum { CLIENTS = 4, N = 8 };
    const char *name = "fair:instances";
    rlock_client *c[CLIENTS];
    rlock *l[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = fc_client(g_srv, 0);
        assert_non_null(c[i]);
        l[i] = tc_open(c[i], RLOCK_FAIR, name);
    }
    rlock *mine = rlock_open(g_client, RLOCK_FAIR, name);
    assert_int_equal(rlock_lock(mine, -1), RLOCK_OK);
    tc_holder w[N];
    atomic_store(&g_next_slot, 0);
    for (int i = 0; i < N; i++) {
        tc_holder_start_ranked(&w[i], &g_next_slot, l[i % CLIENTS], -1, -1, 0);
        assert_int_equal(fc_wait_llen(g_srv, name, i + 1, 5000), 0);
    }
    assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(tc_holder_join(&w[i]), RLOCK_OK);
        assert_int_equal(w[i].place, i);
    }
    rlock_free(mine);
    for (int i = 0; i < CLIENTS; i++) {
        rlock_free(l[i]);
        rlock_client_free(c[i]);
    }
}

/* ---- 500 threads -------------------------------------------------------------------------- */

static atomic_int g_inside;
static atomic_int g_overlaps;
static int g_counter; /* non-atomic on purpose: lost updates reveal overlapping holders */

/* How long each of the 500 threads holds the lock (shorter under TSan, which is slower). */
#define MANY_SLEEP_MS (FC_TSAN ? 2 : 5)

/* One of the 500 threads (a tc_bg call on the lock l): lock, count, unlock. */
static int many_main(void *l)
{
    int rc = rlock_lock(l, 5000);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (atomic_fetch_add(&g_inside, 1) != 0) {
        atomic_fetch_add(&g_overlaps, 1);
    }
    int v = g_counter;
    rh_sleep_ms(MANY_SLEEP_MS);
    g_counter = v + 1;
    atomic_fetch_sub(&g_inside, 1);
    return rlock_unlock(l);
}

static void test_500_threads(void **state)
{
    (void)state;
    enum { N = 500 };
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:500");
    static tc_bg w[N];
    g_counter = 0;
    atomic_store(&g_inside, 0);
    atomic_store(&g_overlaps, 0);
    int64_t t0 = rh_now_ms();
    for (int i = 0; i < N; i++) {
        tc_bg_start(&w[i], many_main, l);
    }
    int failed = 0;
    for (int i = 0; i < N; i++) {
        failed += tc_bg_join(&w[i]) != RLOCK_OK;
    }
    print_message("%d threads lock/sleep %d ms/unlock: all done in %lld ms\n", N, MANY_SLEEP_MS,
                  (long long)(rh_now_ms() - t0));
    assert_int_equal(failed, 0);
    assert_int_equal(atomic_load(&g_overlaps), 0);
    assert_int_equal(g_counter, N);
    FC_ASSERT_NO_WAITERS(g_srv, "fair:500");
    rlock_free(l);
}

/* ---- 50 waiters in 4 processes, 20 repetitions --------------------------------------------- */

static void test_fifo_50_waiters_4_processes(void **state)
{
    (void)state;
    enum { PROCS = 4, N = 50, REPS = 20 };
    const char *name = "fair:fifo50";
    /* Waiter i lives in process i % 4, so consecutive waiters are always in different
     * processes. */
    pid_t kids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        char idx[256] = "";
        for (int i = p; i < N; i += PROCS) {
            size_t len = strlen(idx);
            snprintf(idx + len, sizeof(idx) - len, "%s%d", len ? "," : "", i);
        }
        kids[p] = fc_spawn_child(g_srv, name, 5000, REPS, idx);
        assert_true(kids[p] > 0);
    }
    rlock *l = tc_open(g_client, RLOCK_FAIR, name);
    int total_inversions = 0;
    int64_t t0 = rh_now_ms();
    for (int rep = 0; rep < REPS; rep++) {
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        assert_int_equal(fc_join_in_order(g_srv, name, rep, N), 0);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        int order[FC_MAX_WAITERS];
        int got = fc_read_order(g_srv, name, rep, N, order, 20000);
        assert_int_equal(got, N);
        int inv = fc_inversions(order, got);
        if (inv != 0) {
            print_message("repetition %d: %d inversions\n", rep, inv);
        }
        total_inversions += inv;
        for (int i = 0; i < N; i++) {
            assert_int_equal(order[i], i);
        }
    }
    print_message("%d repetitions of 50 waiters in 4 processes: %d inversions, %lld ms\n", REPS,
                  total_inversions, (long long)(rh_now_ms() - t0));
    assert_int_equal(total_inversions, 0);
    for (int p = 0; p < PROCS; p++) {
        assert_int_equal(rh_wait_child(kids[p], 20000), 0);
    }
    FC_ASSERT_NO_WAITERS(g_srv, name);
    rlock_free(l);
}

FC_MAIN(setup, teardown, cmocka_unit_test(test_lease_timeout_order),
        cmocka_unit_test(test_multi_instance_order), cmocka_unit_test(test_500_threads),
        cmocka_unit_test(test_fifo_50_waiters_4_processes))
