/*
 * Redisson's RedissonLockTest scenarios, ported to the reentrant rlock against a real
 * redis-server: lock/unlock, reentrancy, hold counts, visibility from another thread, unlock by
 * a non-owner, force unlock, lease expiry, remaining TTL, tryLock wait bounds, Redis down.
 *
 * Ownership is per (client, thread), so "another owner" is always another thread here; each
 * helper thread performs exactly one operation and hands its result back through re_run_thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "re_common.h"
#include "tc_steps.h"
#include "tc_thread.h"

typedef struct {
    rh_server *srv;
    rlock_client *c;
} fixture;

static int setup(void **state)
{
    rh_skip_if_unavailable();
    static fixture f;
    f.srv = rh_start(NULL);
    if (f.srv == NULL) {
        return -1;
    }
    f.c = re_client(f.srv);
    *state = &f;
    return f.c == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    rlock_client_free(f->c);
    rh_free(f->srv);
    return 0;
}

/* ---- one operation on another thread ---------------------------------------------------- */

/* Another thread's operation: a tc_call of this thread's kind (TC_UNLOCK, TC_IS_LOCKED, ...), or
 * one of these. */
enum { OP_TRY0 = TC_TRY, OP_LOCK_UNLOCK = 100, OP_TOKEN };

typedef struct {
    rlock *l;
    int op;
    int64_t done_at; /* OP_LOCK_UNLOCK: monotonic time the lock was acquired */
    char err[128];   /* rlock_last_error() of that thread after the operation */
} other_op;

static void *other_main(void *arg)
{
    other_op *o = arg;
    intptr_t r = -1000;
    switch (o->op) {
    case OP_TRY0:
        r = rlock_try_lock(o->l, 0, -1);
        if (r == RLOCK_OK) {
            rlock_unlock(o->l);
        }
        break;
    case OP_LOCK_UNLOCK:
        r = rlock_lock(o->l, -1);
        o->done_at = rh_now_ms();
        if (r == RLOCK_OK) {
            r = rlock_unlock(o->l);
        }
        break;
    case OP_TOKEN:
        r = (intptr_t)rlock_token(o->l);
        break;
    default:
        r = (intptr_t)tc_step_call(o->l, (tc_call)o->op, 0, 0);
        break;
    }
    snprintf(o->err, sizeof(o->err), "%s", rlock_last_error());
    return (void *)r;
}

static long long other(rlock *l, int op)
{
    other_op o = {.l = l, .op = op};
    return re_run_thread(other_main, &o);
}

/* ---- tests ------------------------------------------------------------------------------ */

/* testLockUnlock: lock -> unlock twice; the data on Redis is Redisson's: one hash field
 * "<36-char uuid>:<thread id>" = "1" while held, no key afterwards. */
static void test_lock_unlock(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:lu");
    for (int round = 0; round < 2; round++) {
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        assert_int_equal(rlock_is_locked(l), 1);
        const char *hgetall[] = {"HGETALL", "re:basic:lu", NULL};
        redisReply *r = rh_cmd(f->srv, hgetall);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 2);
        const char *field = r->element[0]->str;
        assert_true(r->element[0]->len > 37);
        assert_int_equal(field[36], ':');
        assert_true(strspn(field + 37, "0123456789") == strlen(field + 37));
        assert_string_equal(r->element[1]->str, "1");
        freeReplyObject(r);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        assert_int_equal(rlock_is_locked(l), 0);
        const char *exists[] = {"EXISTS", "re:basic:lu", NULL};
        assert_int_equal(rh_cmd_int(f->srv, exists), 0);
    }
    rlock_free(l);
}

/* testReentrancy: tryLock twice; another thread's tryLock fails until both holds are released. */
static void test_reentrancy(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:reent");
    TC_STEPS(l, tc_steps_reentrancy, other);
    assert_int_equal(other(l, OP_TRY0), RLOCK_OK);
    rlock_free(l);
}

/* testGetHoldCount: 0,1,0,1,2,1,0 across lock/unlock, read back from Redis. */
static void test_hold_count(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:count");
    TC_STEPS(l, tc_steps_count_up, NULL);
    assert_int_equal(other(l, TC_HOLD_COUNT), 0);
    TC_STEPS(l, tc_steps_count_down, NULL);
    rlock_free(l);
}

/* testIsLocked(OtherThread) / testIsHeldByCurrentThread(OtherThread). */
static void test_visibility_other_thread(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:vis");
    static const tc_step held[] = {
        {TC_IS_LOCKED, 0, 0, 0},        {TC_IS_HELD, 0, 0, 0},
        {TC_OTHER, TC_IS_LOCKED, 0, 0}, {TC_LOCK, -1, 0, RLOCK_OK},
        {TC_IS_LOCKED, 0, 0, 1},        {TC_IS_HELD, 0, 0, 1},
        {TC_OTHER, TC_IS_LOCKED, 0, 1}, {TC_OTHER, TC_IS_HELD, 0, 0},
    };
    TC_STEPS(l, held, other);
    /* A second handle on the same name sees the same lock. */
    rlock *l2 = rlock_open(f->c, RLOCK_REENTRANT, "re:basic:vis");
    static const tc_step second[] = {{TC_IS_LOCKED, 0, 0, 1}, {TC_OTHER, TC_IS_HELD, 0, 0}};
    TC_STEPS(l2, second, other);
    rlock_free(l2);
    static const tc_step released[] = {
        {TC_UNLOCK, 0, 0, RLOCK_OK}, {TC_OTHER, TC_IS_LOCKED, 0, 0}, {TC_IS_HELD, 0, 0, 0}};
    TC_STEPS(l, released, other);
    rlock_free(l);
}

/* testUnlockFail: unlock by a thread that does not hold the lock -> RLOCK_ENOTOWNER with a
 * message, and the lock on Redis is untouched (same hash, still a lease). */
static void test_unlock_by_other_thread(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:unlockfail");
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    const char *hgetall[] = {"HGETALL", "re:basic:unlockfail", NULL};
    redisReply *before = rh_cmd(f->srv, hgetall);
    assert_non_null(before);
    other_op o = {.l = l, .op = TC_UNLOCK};
    assert_int_equal(re_run_thread(other_main, &o), RLOCK_ENOTOWNER);
    assert_true(strlen(o.err) > 0);
    redisReply *after = rh_cmd(f->srv, hgetall);
    assert_non_null(after);
    assert_int_equal(after->elements, 2);
    assert_int_equal(before->elements, after->elements);
    for (size_t i = 0; i < after->elements; i++) {
        assert_string_equal(before->element[i]->str, after->element[i]->str);
    }
    assert_string_equal(after->element[1]->str, "2");
    freeReplyObject(before);
    freeReplyObject(after);
    const char *pttl[] = {"PTTL", "re:basic:unlockfail", NULL};
    long long ttl = rh_cmd_int(f->srv, pttl);
    assert_true(ttl > 50000 && ttl <= 60000);
    /* The owner can still release both holds. */
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
}

/* testForceUnlock: frees a lock whoever holds it; a fresh handle sees it unlocked; the former
 * holder's unlock then reports the hold as lost (it is gone on Redis). */
static void test_force_unlock(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:force");
    static const tc_step forced[] = {
        {TC_FORCE_UNLOCK, 0, 0, 0}, {TC_LOCK, -1, 0, RLOCK_OK}, {TC_IS_LOCKED, 0, 0, 1},
        {TC_FORCE_UNLOCK, 0, 0, 1}, {TC_IS_LOCKED, 0, 0, 0},
    };
    TC_STEPS(l, forced, other);
    rlock *fresh = tc_open(f->c, RLOCK_REENTRANT, "re:basic:force");
    static const tc_step fresh_free[] = {{TC_IS_LOCKED, 0, 0, 0}, {TC_OTHER, OP_TRY0, 0, RLOCK_OK}};
    TC_STEPS(fresh, fresh_free, other);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_true(strlen(rlock_last_error()) > 0);
    rlock_free(fresh);
    rlock_free(l);
}

/* testExpire: lock(2 s) without unlock; another thread's lock() succeeds once the lease ran
 * out: not before 2 s, and within 2 s + 100 ms. The late unlock is RLOCK_ELOST. */
static void test_expire(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:expire");
    assert_int_equal(rlock_lock(l, 2000), RLOCK_OK);
    int64_t t0 = rh_now_ms();
    other_op o = {.l = l, .op = OP_LOCK_UNLOCK};
    assert_int_equal(re_run_thread(other_main, &o), RLOCK_OK);
    int64_t took = o.done_at - t0;
    print_message("expire: the other thread acquired %lld ms after the 2000 ms lease began\n",
                  (long long)took);
    assert_true(took >= 1990);
    assert_true(took <= 2100);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_true(strlen(rlock_last_error()) > 0);
    rlock_free(l);
}

/* testRemainTimeToLive / testRemainTimeToLive2. */
static void test_remaining_ttl(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:ttl");
    assert_int_equal(rlock_remaining_ttl_ms(l), -2);
    assert_int_equal(rlock_lock(l, 3600000), RLOCK_OK);
    int64_t ttl = rlock_remaining_ttl_ms(l);
    assert_true(ttl > 3590000 && ttl <= 3600000);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_remaining_ttl_ms(l), -2);
    /* Without a lease the watchdog's lease applies (default 30 s). */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    ttl = rlock_remaining_ttl_ms(l);
    assert_true(ttl > 29000 && ttl <= 30000);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    /* lock(10 s) x3, unlock x2: the remaining hold keeps a 10 s lease. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    }
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    ttl = rlock_remaining_ttl_ms(l);
    assert_true(ttl >= 9000 && ttl <= 10000);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_remaining_ttl_ms(l), -2);
    rlock_free(l);
}

/* testTryLockWait: tryLock(3 s) on a lock held by another thread returns RLOCK_ETIMEDOUT after
 * 3.0 - 3.3 s. */
static void test_try_lock_wait(void **state)
{
    fixture *f = *state;
    rlock *l = tc_open(f->c, RLOCK_REENTRANT, "re:basic:trywait");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    tc_holder t;
    tc_holder_run(&t, l, 3000, -1, 0);
    int64_t took = t.got_at - t.started_at;
    print_message("tryLock(3000) on a held lock returned after %lld ms\n", (long long)took);
    assert_int_equal(t.rc, RLOCK_ETIMEDOUT);
    assert_true(took >= 3000 && took <= 3300);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    /* Once free, the same wait succeeds at once. */
    tc_holder_run(&t, l, 3000, -1, 0);
    assert_int_equal(t.rc, RLOCK_OK);
    assert_true(t.got_at - t.started_at < 1000);
    rlock_free(l);
}

/* testRedisFailed: with the server gone, tryLock(5 s wait, 10 s lease) reports a connection
 * error quickly (bounded by the connect/command timeouts, not the wait), and so do lock() and
 * the queries. After the server is back the client works again. */
static void test_redis_down(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    rlock_client *c = tc_client_tuned(s, 0, 1000, NULL, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "re:basic:down");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rh_stop(s), 0);

    int64_t t0 = rh_now_ms();
    assert_int_equal(other(l, OP_TRY0), RLOCK_ECONN);
    tc_holder t;
    tc_holder_run(&t, l, 5000, -1, 0);
    int64_t took = t.got_at - t.started_at;
    print_message("Redis down: tryLock(5000, ...) returned %d (%s) after %lld ms\n", t.rc,
                  rlock_strerror(t.rc), (long long)took);
    assert_int_equal(t.rc, RLOCK_ECONN);
    assert_true(took < 2500);
    other_op o = {.l = l, .op = OP_LOCK_UNLOCK};
    assert_int_equal(re_run_thread(other_main, &o), RLOCK_ECONN);
    assert_true(strlen(o.err) > 0);
    assert_int_equal(rlock_is_locked(l), RLOCK_ECONN);
    assert_true(strlen(rlock_last_error()) > 0);
    assert_true(RLOCK_TTL_CODE(rlock_remaining_ttl_ms(l)) == RLOCK_ECONN);
    assert_true(rh_now_ms() - t0 < 10000);

    /* Back with an empty data set: the old hold is gone, new acquisitions work. */
    assert_int_equal(rh_restart(s), 0);
    int64_t deadline = rh_now_ms() + 5000;
    while (rlock_is_locked(l) < 0 && rh_now_ms() < deadline) {
        rh_sleep_ms(50);
    }
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
    rh_free(s);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_lock_unlock), cmocka_unit_test(test_reentrancy),
        cmocka_unit_test(test_hold_count), cmocka_unit_test(test_visibility_other_thread),
        cmocka_unit_test(test_unlock_by_other_thread), cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_expire), cmocka_unit_test(test_remaining_ttl),
        cmocka_unit_test(test_try_lock_wait), cmocka_unit_test(test_redis_down))
