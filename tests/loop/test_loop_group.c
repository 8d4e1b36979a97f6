/*
 * Multi-lock and RedLock groups on loop clients through an adapter (tl_loop.h) against real
 * redis-servers: a multi-lock taken, excluding a threaded client and released; its wait for a
 * busy member and its wait budget; RedLock over three servers with one and two stopped, and with
 * one silent (its attempt decided after redlock_server_timeout_ms, its late grant given back); a
 * group's own on_lost (a multi-lock's first member loss, a RedLock's loss of its majority); a
 * cancelled group wait and a freed member client (waiting, or between RedLock attempts); and
 * the checks of bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

static rlock_client *loop_client(tu_loop *l, rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    o.connect_timeout_ms = 300;
    o.redlock_server_timeout_ms = 3000; /* RedLock's pauses: up to 6 s */
    return tl_client(l, &o);
}

/* A threaded client on s. */
static rlock_client *thread_client(rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tc_client(&o);
}

/* Whether name exists on s (1/0): a lock is held by someone exactly while its key exists. */
static long long exists(rh_server *s, const char *name)
{
    const char *argv[] = {"EXISTS", name, NULL};
    return rh_cmd_int(s, argv);
}

/* A token to fire from the loop and when it was fired. */
typedef struct fire_rec {
    rlock_cancel *tok;
    int64_t at_ms;
} fire_rec;

static void fire_now(void *arg)
{
    fire_rec *f = arg;
    f->at_ms = tl_now_ms();
    rlock_cancel_fire(f->tok);
}

/* Locks the group and runs the loop until done, returning its code (checked once, on the loop). */
static int group_lock(tu_loop *l, rlock *g, rlock_owner *o, int64_t wait_ms)
{
    tl_done d = {0};
    int rc = tl_lock_async(g, o, wait_ms, -1, NULL, &d);
    if (rc != RLOCK_OK) {
        return rc;
    }
    assert_true(tu_run_until(l, &d.calls, 1, 10000));
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.ran_inside, 0);
    return d.rc;
}

/* A multi-lock of a reentrant and a fair lock of loop client a and a reentrant lock of loop
 * client b takes all three, excludes a threaded client from a member, re-enters, and its unlock
 * releases every member. */
static void test_multi_basic(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *b = loop_client(l, s), *t = thread_client(s);
    rlock *m[3] = {tc_open(a, RLOCK_REENTRANT, "lg-m1"), tc_open(a, RLOCK_FAIR, "lg-m2"),
                   tc_open(b, RLOCK_REENTRANT, "lg-m3")};
    rlock *g = rlock_multi_new(m, 3);
    assert_non_null(g);
    rlock_owner *o = tl_owner(a);
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK);
    assert_int_equal(exists(s, "lg-m1") + exists(s, "lg-m2") + exists(s, "lg-m3"), 3);
    assert_int_equal(rlock_token_ex(g, o), 0); /* a multi-lock has none, as a threaded one */
    rlock *lt = tc_open(t, RLOCK_REENTRANT, "lg-m3");
    assert_int_equal(rlock_try_lock(lt, 0, 5000), RLOCK_ETIMEDOUT);
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK); /* re-entered: two holds each */
    tl_unlock_now(l, g, o, RLOCK_OK);
    assert_int_equal(exists(s, "lg-m1") + exists(s, "lg-m2") + exists(s, "lg-m3"), 3);
    tl_unlock_now(l, g, o, RLOCK_OK);
    assert_int_equal(exists(s, "lg-m1") + exists(s, "lg-m2") + exists(s, "lg-m3"), 0);
    tl_unlock_now(l, g, o, RLOCK_ENOTOWNER);
    assert_int_equal(rlock_try_lock(lt, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    rlock_free(lt);
    rlock_free(g);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
    rlock_owner_free(o);
    rlock_client_free(a);
    rlock_client_free(b);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A multi-lock of every other single-name kind (write and read sides, a spin lock) is served as
 * the threaded one is: all taken, a threaded writer excluded from the read member, all
 * released. */
static void test_multi_kinds(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *t = thread_client(s);
    rlock *m[3] = {tc_open(a, RLOCK_WRITE, "lg-k1"), tc_open(a, RLOCK_READ, "lg-k2"),
                   tc_open(a, RLOCK_SPIN, "lg-k3")};
    rlock *g = rlock_multi_new(m, 3);
    assert_non_null(g);
    rlock_owner *o = tl_owner(a);
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK);
    assert_int_equal(exists(s, "lg-k1") + exists(s, "lg-k2") + exists(s, "lg-k3"), 3);
    rlock *lt = tc_open(t, RLOCK_WRITE, "lg-k2");
    assert_int_equal(rlock_try_lock(lt, 0, 5000), RLOCK_ETIMEDOUT);
    tl_unlock_now(l, g, o, RLOCK_OK);
    assert_int_equal(exists(s, "lg-k1") + exists(s, "lg-k2") + exists(s, "lg-k3"), 0);
    assert_int_equal(rlock_try_lock(lt, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    rlock_free(lt);
    rlock_free(g);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
    rlock_owner_free(o);
    rlock_client_free(a);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A member held by a threaded client: the group waits holding nothing, and acquires when it is
 * released; with a wait budget that runs out it completes RLOCK_ETIMEDOUT, holding nothing. */
static void test_multi_wait(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *t = thread_client(s);
    rlock *m[2] = {tc_open(a, RLOCK_REENTRANT, "lg-w1"), tc_open(a, RLOCK_FAIR, "lg-w2")};
    rlock *g = rlock_multi_new(m, 2);
    assert_non_null(g);
    rlock *lt = tc_open(t, RLOCK_FAIR, "lg-w2");
    rlock_owner *o = tl_owner(a);
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(g, o, RLOCK_WAIT_FOREVER, -1, NULL, &d), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(d.calls, 0);
    assert_int_equal(exists(s, "lg-w1"), 0); /* given back while waiting for lg-w2 */
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(exists(s, "lg-w1") + exists(s, "lg-w2"), 2);
    tl_unlock_now(l, g, o, RLOCK_OK);

    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_OK);
    int64_t t0 = tl_now_ms();
    assert_int_equal(group_lock(l, g, o, 400), RLOCK_ETIMEDOUT);
    assert_true(tl_now_ms() - t0 >= 390);
    assert_int_equal(exists(s, "lg-w1"), 0);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    assert_int_equal(exists(s, "lg-w2"), 0);
    rlock_free(lt);
    rlock_free(g);
    rlock_free(m[0]);
    rlock_free(m[1]);
    rlock_owner_free(o);
    rlock_client_free(a);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* RedLock over three servers, one loop client each: all three taken and released; with one
 * server stopped a majority still acquires; with two stopped the acquire fails and leaves
 * nothing on the live server. */
static void test_redlock(void **state)
{
    rh_server *sv[3] = {*state, tc_start(), tc_start()};
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c[3];
    rlock *m[3];
    for (int i = 0; i < 3; i++) {
        c[i] = loop_client(l, sv[i]);
        m[i] = tc_open(c[i], RLOCK_REENTRANT, "lg-red");
    }
    rlock *g = rlock_redlock_new(m, 3);
    assert_non_null(g);
    rlock_owner *o = tl_owner(c[0]);
    /* Tokens drift apart per server: one more grant on server 1 first. */
    rlock_client *t1 = thread_client(sv[1]);
    rlock *l1 = tc_open(t1, RLOCK_REENTRANT, "lg-red");
    assert_int_equal(rlock_try_lock(l1, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_unlock(l1), RLOCK_OK);
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK);
    assert_int_equal(exists(sv[0], "lg-red") + exists(sv[1], "lg-red") + exists(sv[2], "lg-red"),
                     3);
    /* The group's fencing token is the largest of the servers' (server 1's counter). */
    const char *counter[] = {"GET", "redisson_lock_token:{lg-red}", NULL};
    assert_int_equal(rh_cmd_int(sv[1], counter), rh_cmd_int(sv[0], counter) + 1);
    assert_int_equal(rlock_token_ex(g, o), (uint64_t)rh_cmd_int(sv[1], counter));
    rlock_free(l1);
    rlock_client_free(t1);
    tl_unlock_now(l, g, o, RLOCK_OK);
    assert_int_equal(exists(sv[0], "lg-red") + exists(sv[1], "lg-red") + exists(sv[2], "lg-red"),
                     0);

    /* Two servers held by threaded clients: the attempts fail and pause (up to 6 s); a token
     * fired meanwhile ends the wait at once (well within 500 ms on a loaded box), with nothing
     * left on the third server. */
    rlock_client *t[2] = {thread_client(sv[0]), thread_client(sv[1])};
    rlock *lt[2] = {tc_open(t[0], RLOCK_REENTRANT, "lg-red"),
                    tc_open(t[1], RLOCK_REENTRANT, "lg-red")};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rlock_try_lock(lt[i], 0, 30000), RLOCK_OK);
    }
    fire_rec f = {0};
    assert_int_equal(rlock_cancel_new(&f.tok), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(g, o, RLOCK_WAIT_FOREVER, -1, f.tok, &d), RLOCK_OK);
    tl_run_for(l, 150);
    assert_int_equal(d.calls, 0);
    tu_after(l, 50, fire_now, &f);
    tl_wait_done(l, &d, RLOCK_ECANCELED);
    assert_true(f.at_ms > 0 && d.at_ms - f.at_ms < 500);
    assert_int_equal(exists(sv[2], "lg-red"), 0);
    rlock_cancel_free(f.tok);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rlock_unlock(lt[i]), RLOCK_OK);
        rlock_free(lt[i]);
        rlock_client_free(t[i]);
    }

    assert_int_equal(rh_stop(sv[2]), 0);
    assert_int_equal(group_lock(l, g, o, 2000), RLOCK_OK);
    assert_int_equal(exists(sv[0], "lg-red") + exists(sv[1], "lg-red"), 2);
    tl_unlock_now(l, g, o, RLOCK_OK); /* a majority released */
    assert_int_equal(exists(sv[0], "lg-red") + exists(sv[1], "lg-red"), 0);

    assert_int_equal(rh_stop(sv[1]), 0);
    int rc = group_lock(l, g, o, 300);
    assert_true(rc < 0);
    assert_int_not_equal(rc, RLOCK_ENOTSUP);
    tl_run_for(l, 20);
    assert_int_equal(exists(sv[0], "lg-red"), 0);
    rlock_free(g);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
    rlock_owner_free(o);
    for (int i = 0; i < 3; i++) {
        rlock_client_free(c[i]);
    }
    assert_int_equal(tu_loop_close(l), 0);
    rh_free(sv[1]);
    rh_free(sv[2]);
}

/* Three servers (the fixture's and two started here), a loop client on each with the options
 * tune sets, and a reentrant handle of name on each: a RedLock's members. */
typedef struct red3 {
    rh_server *sv[3];
    tu_loop *l;
    rlock_client *c[3];
    rlock *m[3];
} red3;

static void red3_open(red3 *r, rh_server *first, void (*tune)(rlock_options *o), const char *name)
{
    r->sv[0] = first;
    r->sv[1] = tc_start();
    r->sv[2] = tc_start();
    r->l = tu_loop_new();
    assert_non_null(r->l);
    for (int i = 0; i < 3; i++) {
        rlock_options o;
        tc_options(&o, r->sv[i]);
        tune(&o);
        r->c[i] = tl_client(r->l, &o);
        r->m[i] = tc_open(r->c[i], RLOCK_REENTRANT, name);
    }
}

/* Frees the handles, the clients and the loop, then the two servers started (resumed first:
 * a test may leave one stopped). */
static void red3_close(red3 *r)
{
    for (int i = 0; i < 3; i++) {
        rlock_free(r->m[i]);
    }
    for (int i = 0; i < 3; i++) {
        rlock_client_free(r->c[i]);
    }
    assert_int_equal(tu_loop_close(r->l), 0);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(rh_resume(r->sv[i]), 0);
        rh_free(r->sv[i]);
    }
}

static void tune_silent(rlock_options *o)
{
    /* Short: the group's unlock still waits this long for the silent server's release. */
    o->command_timeout_ms = 1000;
    o->redlock_server_timeout_ms = 100;
}

/* RedLock with one server stopped (SIGSTOP: connected, silent): an attempt is decided when the
 * servers' redlock_server_timeout_ms (100 ms) passes, not after command_timeout_ms (1 s), and
 * the silent server's grant, which comes when it resumes, is given back. Then a client freed
 * while such an abandoned attempt is still on its way (ASan: nothing leaks). */
static void test_redlock_silent_server(void **state)
{
    red3 r;
    red3_open(&r, *state, tune_silent, "lg-silent");
    rh_server **sv = r.sv;
    tu_loop *l = r.l;
    rlock_client **c = r.c;
    rlock **m = r.m;
    rlock *g = rlock_redlock_new(m, 3);
    assert_non_null(g);
    rlock_owner *o = tl_owner(c[0]);
    rlock_owner *o2 = tl_owner(c[2]);
    tl_lock_now(l, m[2], o2, 10000); /* the connection to server 2 is up */
    tl_unlock_now(l, m[2], o2, RLOCK_OK);
    rlock_owner_free(o2);
    assert_int_equal(rh_pause(sv[2]), 0);
    int64_t t0 = tl_now_ms();
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK);
    int64_t took = tl_now_ms() - t0;
    print_message("RedLock with a silent server: %lld ms\n", (long long)took);
    assert_true(took < 700);
    assert_int_equal(exists(sv[0], "lg-silent") + exists(sv[1], "lg-silent"), 2);
    tl_unlock_now(l, g, o, RLOCK_OK);
    assert_int_equal(rh_resume(sv[2]), 0);
    tl_run_for(l, 300); /* the late grant arrives, then its give-back */
    const char *counter[] = {"GET", "redisson_lock_token:{lg-silent}", NULL};
    assert_int_equal(rh_cmd_int(sv[2], counter), 2); /* the warm-up's grant and the late one */
    assert_int_equal(exists(sv[2], "lg-silent"), 0);
    assert_int_equal(exists(sv[0], "lg-silent") + exists(sv[1], "lg-silent"), 0);

    assert_int_equal(rh_pause(sv[2]), 0);
    assert_int_equal(group_lock(l, g, o, 0), RLOCK_OK);
    tl_unlock_now(l, g, o, RLOCK_OK);
    rlock_free(g);
    rlock_owner_free(o);
    red3_close(&r); /* server 2's abandoned attempt ends with its client */
}

/* A group's own on_lost: the group handle, once. */
typedef struct lost_rec {
    int calls;
    rlock *lock;
} lost_rec;

static void on_group_lost(rlock *lock, void *user_data)
{
    lost_rec *r = user_data;
    r->calls++;
    r->lock = lock;
}

/* Takes g for o with the watchdog and on_lost into rec; RLOCK_OK expected. */
static void lock_watched(tu_loop *l, rlock *g, rlock_owner *o, lost_rec *rec)
{
    rlock_lock_args args;
    rlock_lock_args_init(&args);
    args.owner = o;
    args.wait_ms = 0;
    args.on_lost = on_group_lost;
    args.user_data = rec;
    tl_done d = {0};
    assert_int_equal(rlock_lock_async(g, &args, tl_lock_done, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
}

static void tune_watched(rlock_options *o)
{
    o->watchdog_timeout_ms = 150; /* renewed every 50 ms */
}

static void del_key(rh_server *s, const char *name)
{
    const char *del[] = {"DEL", name, NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
}

/* A group's own args.on_lost on loop clients, as on threaded ones: a multi-lock is lost with its
 * first member's hold (once, with the group handle); a RedLock only once fewer than a majority
 * of its servers keep the hold. A group freed while held forwards no member's loss any more. */
static void test_group_on_lost(void **state)
{
    red3 r;
    red3_open(&r, *state, tune_watched, "lg-lost");
    rh_server **sv = r.sv;
    tu_loop *l = r.l;
    rlock_client **c = r.c;
    rlock **m = r.m;
    rlock *mu_m[2] = {tc_open(c[0], RLOCK_REENTRANT, "lg-lost-a"),
                      tc_open(c[0], RLOCK_FAIR, "lg-lost-b")};
    rlock *mu = rlock_multi_new(mu_m, 2);
    rlock *red = rlock_redlock_new(m, 3);
    assert_true(mu != NULL && red != NULL);
    rlock_owner *o = tl_owner(c[0]);

    lost_rec rec = {0};
    lock_watched(l, mu, o, &rec);
    tl_run_for(l, 200);
    assert_int_equal(rec.calls, 0); /* renewed, not lost */
    del_key(sv[0], "lg-lost-b");
    tl_run_for(l, 300);
    assert_int_equal(rec.calls, 1);
    assert_ptr_equal(rec.lock, mu);
    tl_done d = {0};
    assert_int_equal(tl_unlock_async(mu, o, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    assert_int_equal(exists(sv[0], "lg-lost-a"), 0);
    assert_int_equal(rec.calls, 1);

    lost_rec red_rec = {0};
    lock_watched(l, red, o, &red_rec);
    del_key(sv[0], "lg-lost");
    tl_run_for(l, 300);
    assert_int_equal(red_rec.calls, 0); /* two of three servers keep it */
    del_key(sv[1], "lg-lost");
    tl_run_for(l, 300);
    assert_int_equal(red_rec.calls, 1);
    assert_ptr_equal(red_rec.lock, red);
    tl_done e = {0};
    assert_int_equal(tl_unlock_async(red, o, &e), RLOCK_OK);
    assert_true(tu_run_until(l, &e.calls, 1, 5000));
    assert_int_equal(exists(sv[2], "lg-lost"), 0);

    /* Freed while held: a member's loss afterwards reaches nothing of the group's. */
    lost_rec gone = {0};
    lock_watched(l, mu, o, &gone);
    rlock_free(mu);
    del_key(sv[0], "lg-lost-a");
    tl_run_for(l, 300);
    assert_int_equal(gone.calls, 0);
    rlock_free(red);
    for (int i = 0; i < 2; i++) {
        rlock_free(mu_m[i]);
    }
    rlock_owner_free(o);
    red3_close(&r);
}

/* A fired token ends a group wait with RLOCK_ECANCELED, no member held; freeing the client of
 * the member being waited for completes the group call with RLOCK_ECLOSED, no member held. */
static void test_cancel_close(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *b = loop_client(l, s), *t = thread_client(s);
    rlock *m[2] = {tc_open(a, RLOCK_REENTRANT, "lg-c1"), tc_open(b, RLOCK_REENTRANT, "lg-c2")};
    rlock *g = rlock_multi_new(m, 2);
    assert_non_null(g);
    rlock *lt = tc_open(t, RLOCK_REENTRANT, "lg-c2");
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_OK);
    rlock_owner *o = tl_owner(a);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(g, o, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    tu_after(l, 150, tl_fire, tok);
    tl_wait_done(l, &d, RLOCK_ECANCELED);
    assert_int_equal(exists(s, "lg-c1"), 0);
    rlock_cancel_free(tok);

    tl_done e = {0};
    assert_int_equal(tl_lock_async(g, o, RLOCK_WAIT_FOREVER, -1, NULL, &e), RLOCK_OK);
    tl_run_for(l, 150);
    assert_int_equal(e.calls, 0);
    rlock_client_free(b);
    tl_wait_done(l, &e, RLOCK_ECLOSED);
    tl_run_for(l, 20);
    assert_int_equal(e.calls, 1);
    assert_int_equal(exists(s, "lg-c1"), 0);

    /* A one-server RedLock between attempts (its member busy, a pause of up to 6 s): freeing the
     * member's client ends it at once. */
    rlock_client *r = loop_client(l, s);
    rlock *lr = tc_open(r, RLOCK_REENTRANT, "lg-c2");
    rlock *red = rlock_redlock_new(&lr, 1);
    assert_non_null(red);
    rlock_owner *orr = tl_owner(r);
    tl_done f = {0};
    assert_int_equal(tl_lock_async(red, orr, RLOCK_WAIT_FOREVER, -1, NULL, &f), RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(f.calls, 0);
    int64_t t0 = tl_now_ms();
    rlock_client_free(r);
    tl_wait_done(l, &f, RLOCK_ECLOSED);
    assert_true(f.at_ms - t0 < 500);
    rlock_free(red);
    rlock_free(lr);
    rlock_owner_free(orr);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);

    /* A RedLock whose third client was freed while it held: its unlock still releases the two
     * others, a majority. */
    rlock_client *x[3] = {loop_client(l, s), loop_client(l, s), loop_client(l, s)};
    rlock *xm[3] = {tc_open(x[0], RLOCK_REENTRANT, "lg-u1"),
                    tc_open(x[1], RLOCK_REENTRANT, "lg-u2"),
                    tc_open(x[2], RLOCK_REENTRANT, "lg-u3")};
    rlock *xr = rlock_redlock_new(xm, 3);
    assert_non_null(xr);
    rlock_owner *ox = tl_owner(x[0]);
    assert_int_equal(group_lock(l, xr, ox, 0), RLOCK_OK);
    rlock_client_free(x[2]);
    tl_unlock_now(l, xr, ox, RLOCK_OK);
    assert_int_equal(exists(s, "lg-u1") + exists(s, "lg-u2"), 0);
    rlock_free(xr);
    for (int i = 0; i < 3; i++) {
        rlock_free(xm[i]);
    }
    rlock_owner_free(ox);
    rlock_client_free(x[0]);
    rlock_client_free(x[1]);

    rlock_free(lt);
    rlock_free(g);
    rlock_free(m[0]);
    rlock_free(m[1]);
    rlock_owner_free(o);
    rlock_client_free(a);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Bad input is refused at the call, and done never runs: no owner, a threaded member beside a
 * loop member, members on two loops. */
static void test_bad_input(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new(), *l2 = tu_loop_new();
    assert_non_null(l);
    assert_non_null(l2);
    rlock_client *a = loop_client(l, s), *b = loop_client(l2, s), *t = thread_client(s);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "lg-b1"), *lb = tc_open(b, RLOCK_REENTRANT, "lg-b2");
    rlock *lt = tc_open(t, RLOCK_REENTRANT, "lg-b3");
    rlock_owner *o = tl_owner(a);
    rlock *loops[2] = {la, lb}, *mixed[2] = {la, lt};
    rlock *g1 = rlock_multi_new(loops, 2), *g2 = rlock_multi_new(mixed, 2);
    rlock *g3 = rlock_redlock_new(mixed, 2);
    assert_non_null(g1);
    assert_non_null(g2);
    assert_non_null(g3);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(g1, NULL, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_lock_async(g1, o, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_lock_async(g2, o, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "threaded"));
    assert_int_equal(tl_lock_async(g3, o, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_unlock_async(g2, o, &d), RLOCK_EINVAL);
    assert_int_equal(tl_unlock_async(g1, NULL, &d), RLOCK_EINVAL);
    tl_run_for(l, 20);
    assert_int_equal(d.calls, 0);
    rlock_free(g1);
    rlock_free(g2);
    rlock_free(g3);
    rlock_free(la);
    rlock_free(lb);
    rlock_free(lt);
    rlock_owner_free(o);
    rlock_client_free(a);
    rlock_client_free(b);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
    assert_int_equal(tu_loop_close(l2), 0);
}

/* One server for the program (RedLock starts two more); each test uses names of its own. */
TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_multi_basic),
        cmocka_unit_test(test_multi_kinds), cmocka_unit_test(test_multi_wait),
        cmocka_unit_test(test_redlock), cmocka_unit_test(test_redlock_silent_server),
        cmocka_unit_test(test_group_on_lost), cmocka_unit_test(test_cancel_close),
        cmocka_unit_test(test_bad_input))
