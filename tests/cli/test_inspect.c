/*
 * rlock_inspect() and rlock_client_interrupt() against a real redis-server: the snapshot of a
 * reentrant lock (and its two waiting rlock threads), a fair lock with three waiters in order, a
 * read-write lock with two readers and a waiting writer, a free name and a key that is not a
 * lock; that inspecting changes nothing; and that an interrupted wait returns at once and
 * leaves the fair queue.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_thread.h"

static rh_server *g_srv;

static rlock_lock_info *inspect(rlock_client *c, const char *name)
{
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(c, name, &in), RLOCK_OK);
    assert_non_null(in);
    return in;
}

/* A waiter that takes the lock when its turn comes and lets it go at once. */
static int lock_and_unlock(void *lock)
{
    int rc = rlock_lock(lock, -1);
    if (rc == RLOCK_OK) {
        rlock_unlock(lock);
    }
    return rc;
}

/* Polls until the lock's fair queue (which 0), waiting-writer set (1) or waiting reentrant
 * threads (2) have n entries. */
static void await_waiters(rlock_client *c, const char *name, size_t n, int which)
{
    for (int i = 0; i < 500; i++) {
        rlock_lock_info *in = inspect(c, name);
        size_t have = which == 1 ? in->n_writers : which == 2 ? in->n_waiters : in->n_queue;
        rlock_lock_info_free(in);
        if (have == n) {
            return;
        }
        rh_sleep_ms(10);
    }
    fail_msg("%s: never saw %zu waiters", name, n);
}

/* Two clients on one lock: c's handle l holds it (a watchdog hold), cw's handle lw is to wait. */
typedef struct held_and_waiting {
    rlock_client *c, *cw;
    rlock *l, *lw;
} held_and_waiting;

static void hw_open(held_and_waiting *h, rlock_kind held, rlock_kind waiting, const char *name)
{
    h->l = tc_hold_own(g_srv, held, name, &h->c);
    h->lw = tc_open_own(g_srv, waiting, name, &h->cw);
}

static void hw_close(held_and_waiting *h)
{
    tc_close_own(h->lw, h->cw);
    tc_close_own(h->l, h->c);
}

static void test_free_and_bad_input(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(g_srv);
    rlock_lock_info *in = inspect(c, "inspect:free");
    assert_int_equal(in->type, RLOCK_TYPE_FREE);
    assert_int_equal(in->locked, 0);
    assert_int_equal(in->ttl_ms, -2);
    assert_int_equal(in->n_holders, 0);
    assert_null(in->mode);
    assert_string_equal(in->name, "inspect:free");
    rlock_lock_info_free(in);

    const char *set[] = {"SET", "inspect:string", "x", NULL};
    rh_cmd_int(g_srv, set);
    in = (rlock_lock_info *)1;
    assert_int_equal(rlock_inspect(c, "inspect:string", &in), RLOCK_EINVAL);
    assert_null(in);
    assert_non_null(strstr(rlock_last_error(), "string"));
    assert_int_equal(rlock_inspect(c, "", &in), RLOCK_EINVAL);
    assert_int_equal(rlock_inspect(NULL, "x", &in), RLOCK_EINVAL);
    assert_int_equal(rlock_inspect(c, "x", NULL), RLOCK_EINVAL);
    rlock_lock_info_free(NULL);
    rlock_client_free(c);
}

static void test_reentrant(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_REENTRANT, "inspect:re", &c);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    rlock_lock_info *in = inspect(c, "inspect:re");
    assert_int_equal(in->type, RLOCK_TYPE_REENTRANT);
    assert_int_equal(in->locked, 1);
    assert_int_equal(in->n_holders, 1);
    assert_int_equal(in->holders[0].count, 2);
    assert_memory_equal(in->holders[0].owner, rlock_client_id(c), 36);
    assert_true(in->ttl_ms > 0 && in->ttl_ms <= 30000);
    assert_int_equal(in->token, rlock_token(l));
    assert_true(in->server_time_ms > 1600000000000LL);
    rlock_lock_info_free(in);
    /* Inspecting changed nothing: the hold is intact and the count still 2. */
    assert_int_equal(rlock_hold_count(l), 2);
    rlock_unlock(l);
    rlock_unlock(l);
    tc_close_own(l, c);
}

/* The rlock threads waiting for a reentrant lock are listed, earliest deadline first, with
 * their liveness deadlines; the lock's other fields stay those of a reentrant lock. */
static void test_reentrant_waiters(void **state)
{
    (void)state;
    held_and_waiting h;
    hw_open(&h, RLOCK_REENTRANT, RLOCK_REENTRANT, "inspect:re:wait");
    tc_bg w[2];
    for (int i = 0; i < 2; i++) {
        tc_bg_start(&w[i], lock_and_unlock, h.lw);
        await_waiters(h.c, "inspect:re:wait", (size_t)i + 1, 2);
    }
    rlock_lock_info *in = inspect(h.c, "inspect:re:wait");
    assert_int_equal(in->type, RLOCK_TYPE_REENTRANT);
    assert_int_equal(in->n_queue, 0);
    assert_int_equal(in->n_writers, 0);
    assert_int_equal(in->n_waiters, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_memory_equal(in->waiters[i].owner, rlock_client_id(h.cw), 36);
        assert_true(in->waiters[i].deadline_ms > in->server_time_ms);
    }
    assert_string_not_equal(in->waiters[0].owner, in->waiters[1].owner);
    assert_true(in->waiters[0].deadline_ms <= in->waiters[1].deadline_ms);
    rlock_lock_info_free(in);
    rlock_unlock(h.l);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tc_bg_join(&w[i]), RLOCK_OK);
    }
    in = inspect(h.c, "inspect:re:wait");
    assert_int_equal(in->n_waiters, 0);
    rlock_lock_info_free(in);
    hw_close(&h);
}

static void test_fair_queue_and_interrupt(void **state)
{
    (void)state;
    held_and_waiting h;
    hw_open(&h, RLOCK_FAIR, RLOCK_FAIR, "inspect:fair");
    tc_bg w[3];
    for (int i = 0; i < 3; i++) {
        tc_bg_start(&w[i], lock_and_unlock, h.lw);
        await_waiters(h.c, "inspect:fair", (size_t)i + 1, 0);
    }
    rlock_lock_info *in = inspect(h.c, "inspect:fair");
    assert_int_equal(in->type, RLOCK_TYPE_FAIR);
    assert_int_equal(in->locked, 1);
    assert_int_equal(in->n_queue, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_memory_equal(in->queue[i].owner, rlock_client_id(h.cw), 36);
        assert_true(in->queue[i].deadline_ms > in->server_time_ms);
    }
    /* Distinct owners, in arrival order: thread ids grow with the threads' first call. */
    assert_string_not_equal(in->queue[0].owner, in->queue[1].owner);
    assert_string_not_equal(in->queue[1].owner, in->queue[2].owner);
    rlock_lock_info_free(in);

    int64_t t0 = rh_now_ms();
    rlock_client_interrupt(h.cw);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tc_bg_join(&w[i]), RLOCK_ETIMEDOUT);
    }
    assert_true(rh_now_ms() - t0 < 5000); /* not the 5 s waiter timeout: they left at once */
    in = inspect(h.c, "inspect:fair");
    assert_int_equal(in->n_queue, 0);
    rlock_lock_info_free(in);
    /* Sticky: a new wait of the interrupted client returns without waiting. */
    assert_int_equal(rlock_try_lock(h.lw, RLOCK_WAIT_FOREVER, -1), RLOCK_ETIMEDOUT);
    assert_non_null(strstr(rlock_last_error(), "interrupted"));
    rlock_unlock(h.l);
    /* A free lock is still taken by the first attempt. */
    assert_int_equal(rlock_try_lock(h.lw, RLOCK_WAIT_FOREVER, -1), RLOCK_OK);
    rlock_unlock(h.lw);
    hw_close(&h);
}

static void test_rw_readers_and_writer(void **state)
{
    (void)state;
    held_and_waiting h;
    hw_open(&h, RLOCK_READ, RLOCK_WRITE, "inspect:rw");
    /* A second reader of the same client, on a thread of its own (another owner). */
    tc_holder r;
    tc_holder_start(&r, h.l, -1, -1, -1);
    assert_int_equal(tc_holder_wait(&r, 10000), RLOCK_OK);
    tc_bg w;
    tc_bg_start(&w, lock_and_unlock, h.lw);
    await_waiters(h.c, "inspect:rw", 1, 1);

    rlock_lock_info *in = inspect(h.c, "inspect:rw");
    assert_int_equal(in->type, RLOCK_TYPE_RW);
    assert_string_equal(in->mode, "read");
    assert_int_equal(in->locked, 1);
    assert_int_equal(in->n_holders, 2);
    assert_string_not_equal(in->holders[0].owner, in->holders[1].owner);
    assert_int_equal(in->holders[0].count, 1);
    assert_int_equal(in->holders[1].count, 1);
    assert_int_equal(in->n_writers, 1);
    assert_memory_equal(in->writers[0].owner, rlock_client_id(h.cw), 36);
    assert_non_null(strstr(in->writers[0].owner, ":write"));
    rlock_lock_info_free(in);

    tc_holder_join(&r);
    rlock_unlock(h.l);
    assert_int_equal(tc_bg_join(&w), RLOCK_OK);
    hw_close(&h);
}

TC_SERVER_FIXTURE(g_srv)

TC_MAIN(setup, teardown, cmocka_unit_test(test_free_and_bad_input),
        cmocka_unit_test(test_reentrant), cmocka_unit_test(test_reentrant_waiters),
        cmocka_unit_test(test_fair_queue_and_interrupt),
        cmocka_unit_test(test_rw_readers_and_writer))
