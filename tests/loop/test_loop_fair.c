/*
 * The fair lock on loop clients through an adapter (tl_loop.h) against a real redis-server:
 * FIFO order of loop owners of two clients and a threaded client's thread in one queue, the
 * hand-off by message, the heartbeat that keeps a waiter queued past waiter_timeout_ms, and the
 * give-ups that leave the queue before done runs: timeout, cancellation, free of the client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tc_metric.h"
#include "tc_redis.h"
#include "tc_thread.h"
#include "tl_common.h"
#include "tl_loop.h"

static rlock_client *loop_client(tu_loop *l, rh_server *s, int64_t waiter_timeout_ms)
{
    rlock_options o;
    tc_options(&o, s);
    if (waiter_timeout_ms > 0) {
        o.waiter_timeout_ms = waiter_timeout_ms;
    }
    return tl_client(l, &o);
}

/* LLEN of the queue or ZCARD of the deadlines of the fair lock name. */
static long long queue_len(rh_server *s, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "redisson_lock_queue:{%s}", name);
    const char *argv[] = {"LLEN", key, NULL};
    return rh_cmd_int(s, argv);
}

static long long zset_len(rh_server *s, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "redisson_lock_timeout:{%s}", name);
    const char *argv[] = {"ZCARD", key, NULL};
    return rh_cmd_int(s, argv);
}

/* Runs the loop until the queue of name has n waiters (each attempt queues on the loop). */
static void wait_queue(tu_loop *l, rh_server *s, const char *name, long long n)
{
    int64_t end = tl_now_ms() + 3000;
    while (queue_len(s, name) != n && tl_now_ms() < end) {
        tl_run_for(l, 5);
    }
    assert_int_equal(queue_len(s, name), n);
    assert_int_equal(zset_len(s, name), n);
}

/* Runs the loop until channel has n subscribers (the loop writes SUBSCRIBE and UNSUBSCRIBE). */
static int wait_numsub(tu_loop *l, rh_server *s, const char *channel, long long n)
{
    int64_t end = tl_now_ms() + 3000;
    while (tc_numsub(s, channel) != n && tl_now_ms() < end) {
        tl_run_for(l, 5);
    }
    return tc_numsub(s, channel) == n;
}

static long long hold_count(rh_server *s, const char *name, rlock_owner *o)
{
    const char *argv[] = {"HGET", name, rlock_owner_id(o), NULL};
    long long n = rh_cmd_int(s, argv);
    return n < 0 ? 0 : n; /* no field */
}

/* ---- FIFO order ------------------------------------------------------------------------- */

#define FIFO_LOOP 4

typedef struct fifo_owner {
    tu_loop *l;
    rlock *lock;
    rlock_owner *owner;
    atomic_int *order;
    int place, errors, released;
} fifo_owner;

static void fifo_unlocked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    fifo_owner *o = user_data;
    o->errors += rc != RLOCK_OK;
    o->released++;
}

static void fifo_release(void *arg)
{
    fifo_owner *o = arg;
    if (rlock_unlock_async(o->lock, o->owner, fifo_unlocked, o) != RLOCK_OK) {
        o->errors++;
        o->released++;
    }
}

static void fifo_locked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    fifo_owner *o = user_data;
    if (rc != RLOCK_OK) {
        o->errors++;
        o->released++;
        return;
    }
    o->place = atomic_fetch_add(o->order, 1);
    tu_after(o->l, 20, fifo_release, o);
}

/* Loop owners of two clients and a threaded client's thread queue behind a holder in a known
 * order; each release hands the lock to the next in line, by message (the leases are 30 s), and
 * the queue is empty at the end. */
static void test_fifo(void **state)
{
    rh_server *s = *state;
    const char *name = "lf-fifo";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c[2] = {loop_client(l, s, 0), loop_client(l, s, 0)};
    rlock *lk[2] = {tc_open(c[0], RLOCK_FAIR, name), tc_open(c[1], RLOCK_FAIR, name)};
    rlock_owner *holder = tl_owner(c[0]);
    tl_lock_now(l, lk[0], holder, 30000);
    atomic_int order = 0;
    fifo_owner o[FIFO_LOOP];
    rlock_options to;
    tc_options(&to, s);
    rlock_client *t = tc_client(&to);
    rlock *tl = tc_open(t, RLOCK_FAIR, name);
    tc_holder th;
    /* Queue: loop owners 0 (client 0), 1 (client 1), the thread, loop owners 2 and 3. */
    for (int i = 0, queued = 0; i < FIFO_LOOP; i++) {
        if (i == 2) {
            tc_holder_start_ranked(&th, &order, tl, -1, 30000, 20);
            wait_queue(l, s, name, ++queued);
        }
        o[i] = (fifo_owner){.l = l, .lock = lk[i % 2], .order = &order, .place = -1};
        o[i].owner = tl_owner(c[i % 2]);
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.owner = o[i].owner;
        a.lease_ms = 30000;
        assert_int_equal(rlock_lock_async(o[i].lock, &a, fifo_locked, &o[i]), RLOCK_OK);
        wait_queue(l, s, name, ++queued);
    }
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, lk[0], holder, RLOCK_OK);
    int released = 0;
    while (released < FIFO_LOOP && tl_now_ms() - t0 < 10000) {
        tl_run_for(l, 10);
        released = 0;
        for (int i = 0; i < FIFO_LOOP; i++) {
            released += o[i].released;
        }
    }
    assert_int_equal(tc_holder_join(&th), RLOCK_OK);
    /* Five hand-offs with 20 ms holds: by message, far within one 30 s lease. */
    assert_true(tl_now_ms() - t0 < 5000);
    static const int want[FIFO_LOOP] = {0, 1, 3, 4};
    for (int i = 0; i < FIFO_LOOP; i++) {
        assert_int_equal(o[i].errors, 0);
        assert_int_equal(o[i].released, 1);
        assert_int_equal(o[i].place, want[i]);
    }
    assert_int_equal(th.place, 2);
    assert_int_equal(queue_len(s, name), 0);
    assert_int_equal(zset_len(s, name), 0);
    const char *exists[] = {"EXISTS", name, NULL};
    assert_int_equal(rh_cmd_int(s, exists), 0);
    for (int i = 0; i < FIFO_LOOP; i++) {
        rlock_owner_free(o[i].owner);
    }
    rlock_free(tl);
    rlock_client_free(t);
    rlock_owner_free(holder);
    rlock_free(lk[0]);
    rlock_free(lk[1]);
    rlock_client_free(c[0]);
    rlock_client_free(c[1]);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- hand-off, re-entry, figures ------------------------------------------------------------ */

/* Re-entry counts on Redis; a waiter of another loop client is handed the lock by the release's
 * message (the lease is 30 s); a threaded waiter is handed it by a loop release; the figures
 * count fair acquisitions. */
static void test_handoff(void **state)
{
    rh_server *s = *state;
    const char *name = "lf-handoff";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_FAIR, name), *lb = tc_open(b, RLOCK_FAIR, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    tl_lock_now(l, la, oa, 30000);
    assert_int_equal(hold_count(s, name, oa), 2);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, -1, NULL, &d), RLOCK_OK);
    wait_queue(l, s, name, 1);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    tl_run_for(l, 200);
    assert_int_equal(d.calls, 0); /* still held once */
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, la, oa, RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_OK);
    assert_int_equal(d.ran_inside, 0);
    assert_true(d.at_ms - t0 < 3000);
    assert_int_equal(hold_count(s, name, ob), 1);
    assert_int_equal(queue_len(s, name), 0);
    tl_unlock_now(l, la, oa, RLOCK_ENOTOWNER);

    /* A threaded waiter behind the loop holder, granted by the loop release. */
    rlock_options to;
    tc_options(&to, s);
    rlock_client *t = tc_client(&to);
    rlock *tl = tc_open(t, RLOCK_FAIR, name);
    tc_holder th;
    tc_holder_start(&th, tl, -1, 30000, 0);
    wait_queue(l, s, name, 1);
    tl_unlock_now(l, lb, ob, RLOCK_OK);
    assert_int_equal(tc_holder_wait(&th, 3000), RLOCK_OK);
    assert_int_equal(tc_holder_join(&th), RLOCK_OK);
    assert_int_equal(tc_metric(b, "rlock_acquire_total", "kind=\"fair\"", "result=\"ok\""), 1);
    assert_int_equal(tc_metric(a, "rlock_acquire_total", "kind=\"fair\"", "result=\"ok\""), 2);
    assert_int_equal(tc_metric(a, "rlock_holds", "kind=\"fair\"", NULL), 0);
    assert_int_equal(tc_metric(b, "rlock_holds", "kind=\"fair\"", NULL), 0);
    rlock_free(tl);
    rlock_client_free(t);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- give-ups --------------------------------------------------------------------------- */

/* A single attempt never queues; a bounded wait that runs out has left the queue when its done
 * runs; a waiter whose wait outlasts waiter_timeout_ms stays queued by its heartbeat (another
 * attempt, which drops dead heads, finds it alive). */
static void test_timeout_leaves(void **state)
{
    rh_server *s = *state;
    const char *name = "lf-timeout";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 300);
    rlock *la = tc_open(a, RLOCK_FAIR, name), *lb = tc_open(b, RLOCK_FAIR, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lb, ob, 0, -1, NULL, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_ETIMEDOUT);
    assert_int_equal(queue_len(s, name), 0);

    tl_done w = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lb, ob, 1500, -1, NULL, &w), RLOCK_OK);
    wait_queue(l, s, name, 1);
    tl_run_for(l, 1000); /* more than three waiter timeouts of b */
    tl_done probe = {0};
    rlock_owner *op = tl_owner(a);
    assert_int_equal(tl_lock_async(la, op, 0, -1, NULL, &probe), RLOCK_OK);
    assert_true(tu_run_until(l, &probe.calls, 1, 3000));
    assert_int_equal(probe.rc, RLOCK_ETIMEDOUT);
    assert_int_equal(queue_len(s, name), 1); /* b's heartbeat kept it */
    assert_true(tu_run_until(l, &w.calls, 1, 3000));
    assert_int_equal(w.rc, RLOCK_ETIMEDOUT);
    assert_true(w.at_ms - t0 >= 1490);
    assert_int_equal(queue_len(s, name), 0); /* left before done ran */
    assert_int_equal(zset_len(s, name), 0);
    assert_int_equal(hold_count(s, name, oa), 1);
    assert_int_equal(tc_metric(b, "rlock_acquire_total", "kind=\"fair\"", "result=\"timeout\""), 2);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    rlock_owner_free(op);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A cancelled waiter has left the queue and its channel when done gets RLOCK_ECANCELED, and the
 * next waiter moves up; a token fired while the first attempt is on its way reports what Redis
 * did: OK with the lock held, or RLOCK_ECANCELED with the owner in no queue. */
static void test_cancel_leaves(void **state)
{
    rh_server *s = *state;
    const char *name = "lf-cancel";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_FAIR, name), *lb = tc_open(b, RLOCK_FAIR, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b), *ob2 = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done d = {0}, next = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    wait_queue(l, s, name, 1);
    assert_int_equal(tl_lock_async(lb, ob2, RLOCK_WAIT_FOREVER, -1, NULL, &next), RLOCK_OK);
    wait_queue(l, s, name, 2);
    char chan[160];
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}:%s", name, rlock_owner_id(ob));
    assert_true(wait_numsub(l, s, chan, 1));
    tu_after(l, 50, tl_fire, tok);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_ECANCELED);
    assert_int_equal(queue_len(s, name), 1); /* left before done ran; the second stays */
    assert_int_equal(zset_len(s, name), 1);
    assert_true(wait_numsub(l, s, chan, 0));
    tl_unlock_now(l, la, oa, RLOCK_OK);
    assert_true(tu_run_until(l, &next.calls, 1, 3000));
    assert_int_equal(next.rc, RLOCK_OK);
    rlock_cancel_free(tok);

    /* Fired right after the call: the attempt is on its way, on a held lock and on a free one. */
    for (int held = 1; held >= 0; held--) {
        if (!held) {
            tl_unlock_now(l, lb, ob2, RLOCK_OK);
        }
        assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
        tl_done r = {0};
        assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, -1, tok, &r), RLOCK_OK);
        rlock_cancel_fire(tok);
        assert_true(tu_run_until(l, &r.calls, 1, 3000));
        tl_run_for(l, 50);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.ran_inside, 0);
        assert_true(r.rc == RLOCK_ECANCELED || (!held && r.rc == RLOCK_OK));
        assert_int_equal(hold_count(s, name, ob), r.rc == RLOCK_OK ? 1 : 0);
        assert_int_equal(queue_len(s, name), 0);
        assert_int_equal(zset_len(s, name), 0);
        if (r.rc == RLOCK_OK) {
            tl_unlock_now(l, lb, ob, RLOCK_OK);
        }
        rlock_cancel_free(tok);
    }
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_owner_free(ob2);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Freeing a client with queued fair waiters (and one whose first attempt is on its way)
 * completes each once with RLOCK_ECLOSED, from the free; their leaves were the connection's last
 * requests, so the queue is empty soon after, long before waiter_timeout_ms (5 s) could empty
 * it. */
static void test_free_pending(void **state)
{
    rh_server *s = *state;
    const char *name = "lf-free";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_FAIR, name), *lb = tc_open(b, RLOCK_FAIR, name);
    rlock_owner *oa = tl_owner(a);
    rlock_owner *ob[4] = {tl_owner(b), tl_owner(b), tl_owner(b), tl_owner(b)};
    tl_lock_now(l, la, oa, 30000);
    tl_done d[4] = {{0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tl_lock_async(lb, ob[i], RLOCK_WAIT_FOREVER, -1, NULL, &d[i]), RLOCK_OK);
    }
    wait_queue(l, s, name, 3);
    assert_int_equal(tl_lock_async(lb, ob[3], RLOCK_WAIT_FOREVER, -1, NULL, &d[3]), RLOCK_OK);
    tl_run_for(l, 1); /* its attempt is written, most likely not yet answered */
    rlock_client_free(b);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].rc, RLOCK_ECLOSED);
    }
    int64_t end = tl_now_ms() + 1000;
    while ((queue_len(s, name) != 0 || zset_len(s, name) != 0) && tl_now_ms() < end) {
        tl_run_for(l, 10);
    }
    assert_int_equal(queue_len(s, name), 0);
    assert_int_equal(zset_len(s, name), 0);
    assert_int_equal(hold_count(s, name, oa), 1);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].calls, 1);
        rlock_owner_free(ob[i]);
    }
    rlock_owner_free(oa);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* One server for the program; each test uses names of its own. */
TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_handoff), cmocka_unit_test(test_timeout_leaves),
        cmocka_unit_test(test_cancel_leaves), cmocka_unit_test(test_free_pending))
