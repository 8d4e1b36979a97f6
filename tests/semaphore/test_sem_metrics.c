/*
 * What semaphores and the latch report (issue 31), counted exactly after known work on a fresh
 * client each: rlock_acquire_total by result (ok, a try and a wait that time out, a token fired
 * before the call and one fired during the wait), the wait histogram (every call once, bad input
 * never), the holds gauge (a semaphore's counts permits) and the hold histogram (leased permits,
 * one per permit), the waiters gauge during a wait, a watched name's gauge, a watchdog permit
 * lost (rlock_lost_total), a latch await counted as an acquire and a count-down not, and the
 * event hook's sequence for each.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_metric.h"
#include "tc_thread.h"

static rh_server *g_srv;
TC_SERVER_FIXTURE(g_srv)

/* The events of one client, in the order the hook saw them. */
#define EV_MAX 64
typedef struct ev_log {
    pthread_mutex_t mu;
    int n;
    rlock_event_type type[EV_MAX];
    int kind[EV_MAX], result[EV_MAX];
} ev_log;

static void on_event(const rlock_event *ev, void *user)
{
    ev_log *g = user;
    pthread_mutex_lock(&g->mu);
    if (g->n < EV_MAX) {
        g->type[g->n] = ev->type;
        g->kind[g->n] = ev->kind;
        g->result[g->n] = ev->result;
        g->n++;
    }
    pthread_mutex_unlock(&g->mu);
}

/* A fresh client whose events go to g (NULL: no hook). */
static rlock_client *client_logged(ev_log *g, int64_t watchdog_ms)
{
    rlock_client *c = tc_client_tuned(g_srv, watchdog_ms, 0, NULL, NULL);
    if (g != NULL) {
        pthread_mutex_init(&g->mu, NULL);
        g->n = 0;
        rlock_client_on_event(c, on_event, g);
    }
    return c;
}

static long long acquires(rlock_client *c, const char *kind, const char *result)
{
    char k[64], r[64];
    snprintf(k, sizeof(k), "kind=\"%s\"", kind);
    snprintf(r, sizeof(r), "result=\"%s\"", result);
    return tc_metric(c, "rlock_acquire_total", k, r);
}

static long long figure(rlock_client *c, const char *name, const char *kind)
{
    char k[64];
    snprintf(k, sizeof(k), "kind=\"%s\"", kind);
    return tc_metric(c, name, k, NULL);
}

/* ok, timeout, canceled, error of kind, then the wait histogram's count. */
static void expect_acquires(rlock_client *c, const char *kind, long long ok, long long timeout,
                            long long canceled, long long error)
{
    assert_int_equal(acquires(c, kind, "ok"), ok);
    assert_int_equal(acquires(c, kind, "timeout"), timeout);
    assert_int_equal(acquires(c, kind, "canceled"), canceled);
    assert_int_equal(acquires(c, kind, "error"), error);
    assert_int_equal(figure(c, "rlock_acquire_wait_seconds_count", kind),
                     ok + timeout + canceled + error);
}

/* The types logged, then the results of the WAIT_FAILED ones in order. */
static void expect_events(ev_log *g, int kind, const rlock_event_type *types, int n,
                          const int *failures)
{
    pthread_mutex_lock(&g->mu);
    assert_int_equal(g->n, n);
    for (int i = 0, f = 0; i < n; i++) {
        assert_int_equal(g->type[i], types[i]);
        assert_int_equal(g->kind[i], kind);
        if (types[i] == RLOCK_EV_WAIT_FAILED) {
            assert_int_equal(g->result[i], failures[f++]);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

typedef struct waiting {
    rlock_semaphore *sem;
    rlock_latch *latch;
    rlock_cancel *cancel;
} waiting;

static int sem_wait_call(void *arg)
{
    waiting *w = arg;
    return rlock_semaphore_acquire_ex(w->sem, 1, RLOCK_WAIT_FOREVER, w->cancel);
}

static int latch_wait_call(void *arg)
{
    waiting *w = arg;
    return rlock_latch_await_ex(w->latch, 10000, w->cancel);
}

/* Until the waiters gauge of kind is n (the waiter is in its call), at most 5 s. */
static void await_waiters(rlock_client *c, const char *kind, long long n)
{
    for (int64_t until = rh_now_ms() + 5000; rh_now_ms() < until;) {
        if (figure(c, "rlock_waiters", kind) == n) {
            return;
        }
        usleep(2000);
    }
    fail_msg("rlock_waiters{kind=\"%s\"} never reached %lld", kind, n);
}

/* Plain permits: an acquire of 2 (holds 2, the watched name's too), a try and a wait that time
 * out, a token fired before the call, one fired during the wait (waiters 1 meanwhile), bad input
 * (not counted), a release of 2 (holds 0; no hold time for permits nobody owns). */
static void test_semaphore(void **state)
{
    (void)state;
    ev_log g;
    rlock_client *c = client_logged(&g, 0);
    assert_int_equal(rlock_metrics_watch(c, "sm:plain"), RLOCK_OK);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sm:plain");
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 2), 1);
    assert_int_equal(rlock_semaphore_acquire(sem, 2, 0), RLOCK_OK);
    assert_int_equal(figure(c, "rlock_holds", "semaphore"), 2);
    assert_int_equal(tc_metric(c, "rlock_name_holds", "name=\"sm:plain\"", "kind=\"semaphore\""),
                     2);
    assert_int_equal(rlock_semaphore_acquire(sem, 1, 0), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_semaphore_acquire(sem, 1, 50), RLOCK_ETIMEDOUT);
    rlock_cancel *fired = NULL, *later = NULL;
    assert_int_equal(rlock_cancel_new(&fired), RLOCK_OK);
    assert_int_equal(rlock_cancel_new(&later), RLOCK_OK);
    rlock_cancel_fire(fired);
    assert_int_equal(rlock_semaphore_acquire_ex(sem, 1, 1000, fired), RLOCK_ECANCELED);
    waiting w = {.sem = sem, .cancel = later};
    tc_bg bg;
    tc_bg_start(&bg, sem_wait_call, &w);
    await_waiters(c, "semaphore", 1);
    assert_true(tc_wait_numsub(g_srv, "redisson_sc:{sm:plain}", 1, 5000));
    rlock_cancel_fire(later);
    assert_int_equal(tc_bg_join(&bg), RLOCK_ECANCELED);
    assert_int_equal(rlock_semaphore_acquire(sem, 0, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire(sem, 1, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release(sem, 2), RLOCK_OK);

    expect_acquires(c, "semaphore", 1, 2, 2, 0);
    assert_int_equal(figure(c, "rlock_holds", "semaphore"), 0);
    assert_int_equal(figure(c, "rlock_waiters", "semaphore"), 0);
    assert_int_equal(figure(c, "rlock_hold_seconds_count", "semaphore"), 0);
    assert_int_equal(tc_metric(c, "rlock_name_holds", "name=\"sm:plain\"", "kind=\"semaphore\""),
                     0);
    const rlock_event_type types[] = {
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_ACQUIRED,    RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED,
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED, RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED,
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED, RLOCK_EV_RELEASED};
    const int failures[] = {RLOCK_ETIMEDOUT, RLOCK_ETIMEDOUT, RLOCK_ECANCELED, RLOCK_ECANCELED};
    expect_events(&g, RLOCK_MK_SEMAPHORE, types, 11, failures);
    rlock_cancel_free(fired);
    rlock_cancel_free(later);
    sc_close(sem, c);
}

/* Leased permits: one and then two at once (holds 3), a try that times out, a token fired before
 * the call; released one by one (holds 0, one hold time per permit). */
static void test_semaphore_leased(void **state)
{
    (void)state;
    ev_log g;
    rlock_client *c = client_logged(&g, 0);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sm:leased");
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 3), 1);
    char one[RLOCK_PERMIT_ID_LEN + 1], two[2][RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(sem, 0, 10000, one), RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquire_leased_n(sem, 2, 0, 10000, two), RLOCK_OK);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 3);
    char none[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased_ex(sem, 0, 10000, NULL, none), RLOCK_ETIMEDOUT);
    rlock_cancel *fired = NULL;
    assert_int_equal(rlock_cancel_new(&fired), RLOCK_OK);
    rlock_cancel_fire(fired);
    assert_int_equal(rlock_semaphore_acquire_leased_ex(sem, 1000, 10000, fired, none),
                     RLOCK_ECANCELED);
    assert_int_equal(rlock_semaphore_acquire_leased(sem, 0, 0, none), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased(sem, one), RLOCK_OK);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 2);
    const char *ids[] = {two[0], two[1]};
    assert_int_equal(rlock_semaphore_release_leased_n(sem, ids, 2), 2);

    expect_acquires(c, "semaphore_leased", 2, 1, 1, 0);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 0);
    assert_int_equal(figure(c, "rlock_hold_seconds_count", "semaphore_leased"), 3);
    assert_int_equal(figure(c, "rlock_acquire_wait_seconds_count", "semaphore"), 0);
    const rlock_event_type types[] = {
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_ACQUIRED,    RLOCK_EV_WAIT_BEGIN, RLOCK_EV_ACQUIRED,
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED, RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED,
        RLOCK_EV_RELEASED,   RLOCK_EV_RELEASED,    RLOCK_EV_RELEASED};
    const int failures[] = {RLOCK_ETIMEDOUT, RLOCK_ECANCELED};
    expect_events(&g, RLOCK_MK_SEMAPHORE_LEASED, types, 11, failures);
    rlock_cancel_free(fired);
    sc_close(sem, c);
}

static atomic_int g_lost;

static void count_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&g_lost, 1);
}

/* A watchdog permit whose zset is deleted: the watchdog reports it lost once (rlock_lost_total,
 * holds back to 0), and its release then answers RLOCK_ELOST without ending the hold again. */
static void test_leased_permit_lost(void **state)
{
    (void)state;
    atomic_store(&g_lost, 0);
    rlock_client *c = tc_client_tuned(g_srv, 600, 0, count_lost, NULL);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sm:lost");
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(sem, 0, -1, id), RLOCK_OK);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 1);
    const char *del[] = {"DEL", "{sm:lost}:timeout", NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    for (int64_t until = rh_now_ms() + 5000; atomic_load(&g_lost) == 0 && rh_now_ms() < until;) {
        usleep(5000);
    }
    assert_int_equal(atomic_load(&g_lost), 1);
    assert_int_equal(figure(c, "rlock_lost_total", "semaphore_leased"), 1);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 0);
    assert_int_equal(rlock_semaphore_release_leased(sem, id), RLOCK_ELOST);
    assert_int_equal(figure(c, "rlock_holds", "semaphore_leased"), 0);
    assert_int_equal(figure(c, "rlock_hold_seconds_count", "semaphore_leased"), 0);
    sc_close(sem, c);
}

/* Latch awaits are acquires that hold nothing: one times out, a token fired before the call, a
 * waiter (waiters 1) released by a count-down, an await of the open latch; bad input and the
 * count-down itself are not counted. */
static void test_latch(void **state)
{
    (void)state;
    ev_log g;
    rlock_client *c = client_logged(&g, 0);
    rlock_latch *l = rlock_latch_open(c, "sm:latch");
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    assert_int_equal(rlock_latch_await(l, 50), RLOCK_ETIMEDOUT);
    rlock_cancel *fired = NULL;
    assert_int_equal(rlock_cancel_new(&fired), RLOCK_OK);
    rlock_cancel_fire(fired);
    assert_int_equal(rlock_latch_await_ex(l, 1000, fired), RLOCK_ECANCELED);
    waiting w = {.latch = l};
    tc_bg bg;
    tc_bg_start(&bg, latch_wait_call, &w);
    await_waiters(c, "latch", 1);
    assert_true(tc_wait_numsub(g_srv, "redisson_countdownlatch__channel__{sm:latch}", 1, 5000));
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_OK);
    assert_int_equal(rlock_latch_await(l, -1), RLOCK_EINVAL);

    expect_acquires(c, "latch", 2, 1, 1, 0);
    assert_int_equal(figure(c, "rlock_holds", "latch"), 0);
    assert_int_equal(figure(c, "rlock_waiters", "latch"), 0);
    const rlock_event_type types[] = {
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED, RLOCK_EV_WAIT_BEGIN, RLOCK_EV_WAIT_FAILED,
        RLOCK_EV_WAIT_BEGIN, RLOCK_EV_ACQUIRED,    RLOCK_EV_WAIT_BEGIN, RLOCK_EV_ACQUIRED};
    const int failures[] = {RLOCK_ETIMEDOUT, RLOCK_ECANCELED};
    expect_events(&g, RLOCK_MK_LATCH, types, 8, failures);
    rlock_cancel_free(fired);
    rlock_latch_free(l);
    rlock_client_free(c);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_semaphore), cmocka_unit_test(test_semaphore_leased),
        cmocka_unit_test(test_leased_permit_lost), cmocka_unit_test(test_latch))
