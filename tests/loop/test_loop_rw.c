/*
 * The read-write lock and the spin lock on loop clients through an adapter (tl_loop.h) against
 * a real redis-server: readers share and writers exclude, with a threaded client's handles on
 * the same names; the wake-ups of a waiting writer and reader; re-entry; give-ups by a token
 * that leave nothing on Redis; the loop watchdog's renewal of read and write holds; the spin
 * lock's polling wait; the arguments refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_thread.h"
#include "tl_common.h"
#include "tl_loop.h"

static rlock_client *loop_client(tu_loop *l, rh_server *s, int64_t watchdog_ms)
{
    rlock_options o;
    tc_options(&o, s);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    return tl_client(l, &o);
}

static rlock_client *thread_client(rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tc_client(&o);
}

/* One rlock_lock_async() run to its done, which must run once and on the loop: its code. */
static int lock_rc(tu_loop *l, rlock *lk, rlock_owner *o, int64_t wait_ms, int64_t lease_ms)
{
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, o, wait_ms, lease_ms, NULL, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    tl_run_for(l, 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.ran_inside, 0);
    return d.rc;
}

static long long hget(rh_server *s, const char *key, const char *field)
{
    const char *argv[] = {"HGET", key, field, NULL};
    long long n = rh_cmd_int(s, argv);
    return n < 0 ? 0 : n; /* no field */
}

static long long key_exists(rh_server *s, const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(s, argv);
}

static long long dbsize(rh_server *s)
{
    const char *argv[] = {"DBSIZE", NULL};
    return rh_cmd_int(s, argv);
}

static long long zcard(rh_server *s, const char *key)
{
    const char *argv[] = {"ZCARD", key, NULL};
    return rh_cmd_int(s, argv);
}

/* Runs the loop until channel has n subscribers. */
static int wait_numsub(tu_loop *l, rh_server *s, const char *channel, long long n)
{
    int64_t end = tl_now_ms() + 3000;
    while (tc_numsub(s, channel) != n && tl_now_ms() < end) {
        tl_run_for(l, 5);
    }
    return tc_numsub(s, channel) == n;
}

/* ---- sharing and exclusion ------------------------------------------------------------- */

/* Loop readers share with each other and with a threaded reader; a loop writer is kept out by
 * them, and keeps out loop and threaded readers and writers; a threaded writer keeps loop
 * readers and writers out. */
static void test_share_exclude(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-share";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *t = thread_client(s);
    rlock *r = tc_open(a, RLOCK_READ, name), *w = tc_open(a, RLOCK_WRITE, name);
    rlock *tr = tc_open(t, RLOCK_READ, name), *tw = tc_open(t, RLOCK_WRITE, name);
    rlock_owner *o1 = tl_owner(a), *o2 = tl_owner(a), *ow = tl_owner(a);
    assert_int_equal(lock_rc(l, r, o1, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, r, o2, 0, 10000), RLOCK_OK);
    assert_int_equal(hget(s, name, rlock_owner_id(o1)), 1);
    assert_int_equal(hget(s, name, rlock_owner_id(o2)), 1);
    assert_int_equal(rlock_try_lock(tr, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(tr), RLOCK_OK);
    assert_int_equal(rlock_try_lock(tw, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(lock_rc(l, w, ow, 0, 10000), RLOCK_ETIMEDOUT);
    tl_unlock_now(l, r, o1, RLOCK_OK);
    tl_unlock_now(l, r, o2, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);

    assert_int_equal(lock_rc(l, w, ow, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, r, o1, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(lock_rc(l, w, o1, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_try_lock(tr, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_try_lock(tw, 0, 10000), RLOCK_ETIMEDOUT);
    tl_unlock_now(l, w, ow, RLOCK_OK);

    assert_int_equal(rlock_try_lock(tw, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, r, o1, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(lock_rc(l, w, o1, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(tw), RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);
    rlock_owner_free(o1);
    rlock_owner_free(o2);
    rlock_owner_free(ow);
    rlock_free(r);
    rlock_free(w);
    rlock_free(tr);
    rlock_free(tw);
    rlock_client_free(t);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Read inside write and write re-entry count on Redis; read -> write is RLOCK_EDEADLK; an
 * unlock by an owner that holds nothing gives what the threaded call gives. */
static void test_reentry(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-reentry";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *t = thread_client(s);
    rlock *r = tc_open(a, RLOCK_READ, name), *w = tc_open(a, RLOCK_WRITE, name);
    rlock *tw = tc_open(t, RLOCK_WRITE, name);
    rlock_owner *o = tl_owner(a), *other = tl_owner(a);
    char wfield[128];
    snprintf(wfield, sizeof(wfield), "%s:write", rlock_owner_id(o));
    assert_int_equal(lock_rc(l, w, o, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, w, o, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, r, o, 0, 10000), RLOCK_OK);
    assert_int_equal(hget(s, name, wfield), 2);
    assert_int_equal(hget(s, name, rlock_owner_id(o)), 1);
    /* The owner's read and write holds are two records: each unlock finds its own. */
    tl_unlock_now(l, r, o, RLOCK_OK);
    tl_unlock_now(l, w, o, RLOCK_OK);
    assert_int_equal(hget(s, name, wfield), 1);
    tl_unlock_now(l, w, other, RLOCK_ENOTOWNER);
    tl_unlock_now(l, r, other, RLOCK_ENOTOWNER);
    assert_int_equal(rlock_unlock(tw), RLOCK_ENOTOWNER);
    tl_unlock_now(l, w, o, RLOCK_OK);
    tl_unlock_now(l, w, o, RLOCK_ENOTOWNER);
    assert_int_equal(key_exists(s, name), 0);

    assert_int_equal(lock_rc(l, r, o, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, w, o, RLOCK_WAIT_FOREVER, 10000), RLOCK_EDEADLK);
    tl_unlock_now(l, r, o, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);
    rlock_owner_free(o);
    rlock_owner_free(other);
    rlock_free(r);
    rlock_free(w);
    rlock_free(tw);
    rlock_client_free(t);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- wake-ups ---------------------------------------------------------------------------- */

/* A waiting loop writer is woken when the last reader leaves, not before, and keeps new readers
 * out meanwhile; a waiting loop reader is woken when the writer leaves; the leases are 30 s, so
 * only the release's message can wake them in time. */
static void test_wakeups(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-wake";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *ra = tc_open(a, RLOCK_READ, name), *wb = tc_open(b, RLOCK_WRITE, name);
    rlock *rb = tc_open(b, RLOCK_READ, name);
    rlock_owner *o1 = tl_owner(a), *o2 = tl_owner(a), *ow = tl_owner(b), * or = tl_owner(b);
    assert_int_equal(lock_rc(l, ra, o1, 0, 30000), RLOCK_OK);
    assert_int_equal(lock_rc(l, ra, o2, 0, 30000), RLOCK_OK);
    tl_done dw = {0};
    assert_int_equal(tl_lock_async(wb, ow, RLOCK_WAIT_FOREVER, 30000, NULL, &dw), RLOCK_OK);
    tl_run_for(l, 100);
    tl_unlock_now(l, ra, o1, RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(dw.calls, 0); /* one reader is left */
    /* The waiting writer keeps new readers out (a writer-preferring client, the default). */
    assert_int_equal(lock_rc(l, rb, or, 0, 30000), RLOCK_ETIMEDOUT);
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, ra, o2, RLOCK_OK);
    tl_wait_done(l, &dw, RLOCK_OK);
    assert_true(dw.at_ms - t0 < 2000);

    tl_done dr = {0};
    assert_int_equal(tl_lock_async(rb, or, RLOCK_WAIT_FOREVER, 30000, NULL, &dr), RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(dr.calls, 0);
    t0 = tl_now_ms();
    tl_unlock_now(l, wb, ow, RLOCK_OK);
    tl_wait_done(l, &dr, RLOCK_OK);
    assert_true(dr.at_ms - t0 < 2000);
    tl_unlock_now(l, rb, or, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);
    rlock_owner_free(o1);
    rlock_owner_free(o2);
    rlock_owner_free(ow);
    rlock_owner_free(or);
    rlock_free(ra);
    rlock_free(rb);
    rlock_free(wb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Wake-ups across client kinds: a threaded writer waiting behind a loop reader is woken by the
 * loop release (on its own channel), and a loop reader waiting behind a threaded writer by the
 * threaded release; the leases are 30 s. */
static void test_cross_wakeups(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-cross";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *t = thread_client(s);
    rlock *r = tc_open(a, RLOCK_READ, name), *tw = tc_open(t, RLOCK_WRITE, name);
    rlock_owner *o = tl_owner(a);
    char zset[128];
    snprintf(zset, sizeof(zset), "rlock_rwlock_writers:{%s}", name);
    assert_int_equal(lock_rc(l, r, o, 0, 30000), RLOCK_OK);
    tc_holder th;
    tc_holder_start(&th, tw, -1, 30000, 0);
    int64_t end = tl_now_ms() + 3000;
    while (zcard(s, zset) != 1 && tl_now_ms() < end) {
        tl_run_for(l, 5);
    }
    assert_int_equal(zcard(s, zset), 1);
    tl_unlock_now(l, r, o, RLOCK_OK);
    assert_int_equal(tc_holder_wait(&th, 2000), RLOCK_OK);
    assert_int_equal(tc_holder_join(&th), RLOCK_OK);

    tc_holder_start(&th, tw, 0, 30000, -1);
    assert_int_equal(tc_holder_wait(&th, 3000), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(r, o, RLOCK_WAIT_FOREVER, 30000, NULL, &d), RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(d.calls, 0);
    int64_t t0 = tl_now_ms();
    assert_int_equal(tc_holder_join(&th), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(d.at_ms - t0 < 2000);
    tl_unlock_now(l, r, o, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);
    rlock_owner_free(o);
    rlock_free(r);
    rlock_free(tw);
    rlock_client_free(t);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- cancellation ------------------------------------------------------------------------ */

/* A waiting writer (recorded in the waiting-writers zset, on its own channel) and a waiting
 * reader (on Redisson's channel) cancelled by their tokens: done gets RLOCK_ECANCELED once they
 * have left the zset and the channel, and Redis holds no key more than before they waited. A
 * waiting writer of a freed client leaves the zset too. */
static void test_cancel(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-cancel";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *wa = tc_open(a, RLOCK_WRITE, name);
    rlock *rb = tc_open(b, RLOCK_READ, name), *wb = tc_open(b, RLOCK_WRITE, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    assert_int_equal(lock_rc(l, wa, oa, 0, 30000), RLOCK_OK);
    long long keys = dbsize(s);
    char zset[128], wchan[256], rchan[128];
    snprintf(zset, sizeof(zset), "rlock_rwlock_writers:{%s}", name);
    snprintf(wchan, sizeof(wchan), "rlock_rwlock_writer:{%s}:%s:write", name, rlock_owner_id(ob));
    snprintf(rchan, sizeof(rchan), "redisson_rwlock:{%s}", name);

    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(wb, ob, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    assert_true(wait_numsub(l, s, wchan, 1));
    assert_int_equal(zcard(s, zset), 1);
    tu_after(l, 20, tl_fire, tok);
    tl_wait_done(l, &d, RLOCK_ECANCELED);
    assert_int_equal(key_exists(s, zset), 0);
    assert_true(wait_numsub(l, s, wchan, 0));
    rlock_cancel_free(tok);

    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    d = (tl_done){0};
    assert_int_equal(tl_lock_async(rb, ob, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    assert_true(wait_numsub(l, s, rchan, 1));
    tu_after(l, 20, tl_fire, tok);
    tl_wait_done(l, &d, RLOCK_ECANCELED);
    assert_true(wait_numsub(l, s, rchan, 0));
    assert_int_equal(hget(s, name, rlock_owner_id(ob)), 0);
    assert_int_equal(dbsize(s), keys);
    rlock_cancel_free(tok);

    /* Freeing the client completes a waiting writer with RLOCK_ECLOSED, from the free; its
     * leave was the connection's last request, so the zset empties long before
     * waiter_timeout_ms could empty it. */
    d = (tl_done){0};
    assert_int_equal(tl_lock_async(wb, ob, RLOCK_WAIT_FOREVER, -1, NULL, &d), RLOCK_OK);
    assert_true(wait_numsub(l, s, wchan, 1));
    rlock_client_free(b);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, RLOCK_ECLOSED);
    int64_t end = tl_now_ms() + 1000;
    while (key_exists(s, zset) != 0 && tl_now_ms() < end) {
        tl_run_for(l, 10);
    }
    assert_int_equal(key_exists(s, zset), 0);
    assert_int_equal(d.calls, 1);
    tl_unlock_now(l, wa, oa, RLOCK_OK);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(wa);
    rlock_free(rb);
    rlock_free(wb);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- watchdog ---------------------------------------------------------------------------- */

/* With a 300 ms watchdog timeout, a write hold and a read hold taken with the watchdog outlive
 * three of their leases: the loop watchdog renews the hash and the read hold's timeout key. */
static void test_watchdog(void **state)
{
    rh_server *s = *state;
    const char *wname = "lrw-wd-write", *rname = "lrw-wd-read";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 300), *t = thread_client(s);
    rlock *w = tc_open(a, RLOCK_WRITE, wname), *r = tc_open(a, RLOCK_READ, rname);
    rlock *tw = tc_open(t, RLOCK_WRITE, rname);
    rlock_owner *o = tl_owner(a);
    assert_int_equal(lock_rc(l, w, o, 0, -1), RLOCK_OK);
    assert_int_equal(lock_rc(l, r, o, 0, -1), RLOCK_OK);
    char tkey[160];
    snprintf(tkey, sizeof(tkey), "{%s}:%s:rwlock_timeout:1", rname, rlock_owner_id(o));
    assert_int_equal(key_exists(s, tkey), 1);
    tl_run_for(l, 1000);
    assert_int_equal(key_exists(s, wname), 1);
    assert_int_equal(key_exists(s, rname), 1);
    assert_int_equal(key_exists(s, tkey), 1);
    assert_int_equal(rlock_try_lock(tw, 0, 1000), RLOCK_ETIMEDOUT);
    tl_unlock_now(l, w, o, RLOCK_OK);
    tl_unlock_now(l, r, o, RLOCK_OK);
    assert_int_equal(key_exists(s, wname), 0);
    assert_int_equal(key_exists(s, rname), 0);
    rlock_owner_free(o);
    rlock_free(w);
    rlock_free(r);
    rlock_free(tw);
    rlock_client_free(t);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- spin lock --------------------------------------------------------------------------- */

static void unlock_threaded(void *lock)
{
    assert_int_equal(rlock_unlock(lock), RLOCK_OK);
}

/* A loop spin hold keeps out a threaded spin and a threaded reentrant handle on its name; a
 * loop spin waiter takes the lock soon after a threaded release, with no channel; a cancelled
 * spin waiter completes RLOCK_ECANCELED and a freed client's RLOCK_ECLOSED. */
static void test_spin(void **state)
{
    rh_server *s = *state;
    const char *name = "lrw-spin";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0), *t = thread_client(s);
    rlock *sp = tc_open(a, RLOCK_SPIN, name), *spb = tc_open(b, RLOCK_SPIN, name);
    rlock *ts = tc_open(t, RLOCK_SPIN, name), *tr = tc_open(t, RLOCK_REENTRANT, name);
    rlock_owner *o = tl_owner(a), *o2 = tl_owner(a), *ob = tl_owner(b);
    assert_int_equal(lock_rc(l, sp, o, 0, 10000), RLOCK_OK);
    assert_int_equal(lock_rc(l, sp, o, 0, 10000), RLOCK_OK);
    assert_int_equal(hget(s, name, rlock_owner_id(o)), 2);
    assert_int_equal(rlock_try_lock(ts, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_try_lock(tr, 0, 10000), RLOCK_ETIMEDOUT);
    tl_unlock_now(l, sp, o, RLOCK_OK);
    tl_unlock_now(l, sp, o, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);

    /* Held by a threaded reentrant handle for 300 ms of a 30 s lease: the spin waiter polls. */
    assert_int_equal(rlock_try_lock(tr, 0, 30000), RLOCK_OK);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(sp, o, 5000, 10000, NULL, &d), RLOCK_OK);
    tu_after(l, 300, unlock_threaded, tr);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(d.at_ms - t0 >= 290);
    assert_true(d.at_ms - t0 < 1500); /* a pause is at most 128 ms */
    assert_int_equal(rlock_try_lock(ts, 0, 10000), RLOCK_ETIMEDOUT);

    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done c = {0}, f = {0};
    assert_int_equal(tl_lock_async(sp, o2, RLOCK_WAIT_FOREVER, 10000, tok, &c), RLOCK_OK);
    assert_int_equal(tl_lock_async(spb, ob, RLOCK_WAIT_FOREVER, 10000, NULL, &f), RLOCK_OK);
    tu_after(l, 200, tl_fire, tok);
    tl_wait_done(l, &c, RLOCK_ECANCELED);
    assert_int_equal(hget(s, name, rlock_owner_id(o2)), 0);
    assert_int_equal(f.calls, 0);
    rlock_client_free(b);
    assert_int_equal(f.calls, 1);
    assert_int_equal(f.rc, RLOCK_ECLOSED);
    tl_run_for(l, 50);
    assert_int_equal(f.calls, 1);
    assert_int_equal(hget(s, name, rlock_owner_id(ob)), 0);
    tl_unlock_now(l, sp, o, RLOCK_OK);
    assert_int_equal(key_exists(s, name), 0);
    rlock_cancel_free(tok);
    rlock_owner_free(o);
    rlock_owner_free(o2);
    rlock_owner_free(ob);
    rlock_free(sp);
    rlock_free(spb);
    rlock_free(ts);
    rlock_free(tr);
    rlock_client_free(t);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- bad input --------------------------------------------------------------------------- */

/* Refused before anything starts, done never running: no owner, a zero lease, a negative wait
 * other than RLOCK_WAIT_FOREVER, no done; a blocking call on a loop client's handle. */
static void test_bad_input(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0);
    rlock_owner *o = tl_owner(a);
    static const rlock_kind kinds[3] = {RLOCK_READ, RLOCK_WRITE, RLOCK_SPIN};
    for (int i = 0; i < 3; i++) {
        rlock *lk = tc_open(a, kinds[i], "lrw-bad");
        tl_done d = {0};
        assert_int_equal(tl_lock_async(lk, NULL, 0, 1000, NULL, &d), RLOCK_EINVAL);
        assert_int_equal(tl_lock_async(lk, o, 0, 0, NULL, &d), RLOCK_EINVAL);
        assert_int_equal(tl_lock_async(lk, o, -5, 1000, NULL, &d), RLOCK_EINVAL);
        assert_int_equal(tl_unlock_async(lk, NULL, &d), RLOCK_EINVAL);
        rlock_lock_args args;
        rlock_lock_args_init(&args);
        args.owner = o;
        assert_int_equal(rlock_lock_async(lk, &args, NULL, NULL), RLOCK_EINVAL);
        assert_int_equal(rlock_unlock_async(lk, o, NULL, NULL), RLOCK_EINVAL);
        assert_int_equal(rlock_try_lock(lk, 0, 1000), RLOCK_EINVAL);
        tl_run_for(l, 20);
        assert_int_equal(d.calls, 0);
        rlock_free(lk);
    }
    rlock_owner_free(o);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* One server for the program; each test uses names of its own. */
TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_share_exclude),
        cmocka_unit_test(test_reentry), cmocka_unit_test(test_wakeups),
        cmocka_unit_test(test_cross_wakeups), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_watchdog), cmocka_unit_test(test_spin),
        cmocka_unit_test(test_bad_input))
