/*
 * Loop clients through an adapter (tl_loop.h: libuv or libevent) against a real redis-server:
 * the argument checks, a reentrant lock taken and released without a thread started, two loop
 * clients (and a threaded client) excluding each other with a hand-off by message, cancellation
 * that leaves the channel, a wait that times out, watchdog renewals on the loop's timer, and a free
 * with pending operations that completes each once with RLOCK_ECLOSED.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tl_common.h"
#include "tl_loop.h"
#include "tc_metric.h"
#include "tc_redis.h"

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static rlock_client *loop_client(tu_loop *l, rh_server *s, int64_t watchdog_ms)
{
    rlock_options o;
    tc_options(&o, s);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    return tl_client(l, &o);
}

static long long hold_count(rh_server *s, const char *name, rlock_owner *o)
{
    const char *argv[] = {"HGET", name, rlock_owner_id(o), NULL};
    return rh_cmd_int(s, argv);
}

/* Bad input is refused with a code, done never runs; blocking calls on a loop client and async
 * calls on a threaded client are RLOCK_EINVAL. */
static void test_checks(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_loop empty = {0};
    rlock_client *bad = NULL;
    assert_int_equal(rlock_loop_client_new(NULL, &empty, &bad), RLOCK_EINVAL);
    rlock_options o;
    tc_options(&o, s);
    o.url = "redis-cluster://127.0.0.1:6379";
    o.cluster_pubsub = 7; /* no such pub/sub mode */
    assert_int_equal(tu_client_new(l, &o, &bad), RLOCK_EINVAL);
    assert_null(bad);
    rlock_client *c = loop_client(l, s, 0);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-checks");
    rlock *fair = tc_open(c, RLOCK_FAIR, "loop-checks-fair");
    rlock_owner *ow = tl_owner(c);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, NULL, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_lock_async(lk, ow, 0, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_unlock_async(lk, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(rlock_try_lock(lk, 0, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock(lk), RLOCK_EINVAL);
    assert_int_equal(rlock_is_locked(lk), RLOCK_EINVAL);
    rlock_cancel *fired = NULL;
    assert_int_equal(rlock_cancel_new(&fired), RLOCK_OK);
    rlock_cancel_fire(fired);
    assert_int_equal(tl_lock_async(lk, ow, 0, -1, fired, &d), RLOCK_ECANCELED);
    rlock_cancel_free(fired);
    rlock_options to;
    tc_options(&to, s);
    rlock_client *threaded = tc_client(&to);
    rlock *tl = tc_open(threaded, RLOCK_REENTRANT, "loop-checks");
    rlock_owner *tow = tl_owner(threaded);
    assert_int_equal(tl_lock_async(tl, tow, 0, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(tl_lock_async(lk, tow, 0, -1, NULL, &d), RLOCK_EINVAL); /* another client's */
    rlock_owner_free(tow);
    rlock_free(tl);
    rlock_client_free(threaded);
    tl_run_for(l, 50);
    assert_int_equal(d.calls, 0);
    /* A refused AUTH reaches the first operation's done. */
    char url[128];
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d", rh_port(s));
    rlock_options wo;
    tc_options(&wo, s);
    wo.url = url;
    rlock_client *wc = tl_client(l, &wo);
    rlock *wl = tc_open(wc, RLOCK_REENTRANT, "loop-checks");
    rlock_owner *wow = tl_owner(wc);
    tl_done wd = {0};
    assert_int_equal(tl_lock_async(wl, wow, 0, -1, NULL, &wd), RLOCK_OK);
    assert_true(tu_run_until(l, &wd.calls, 1, 3000));
    assert_int_equal(wd.rc, RLOCK_EAUTH);
    rlock_owner_free(wow);
    rlock_free(wl);
    rlock_client_free(wc);
    rlock_owner_free(ow);
    rlock_free(fair);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Lock, re-enter, unlock twice: the hold count on Redis follows; no thread is started. */
static void test_lock_unlock_no_thread(void **state)
{
    rh_server *s = *state;
    int before = threads_now();
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-basic");
    rlock_owner *ow = tl_owner(c);
    tl_lock_now(l, lk, ow, -1);
    assert_int_equal(hold_count(s, "loop-basic", ow), 1);
    /* The hold's fencing token, from the client's record: the lock's counter on Redis. */
    const char *counter[] = {"GET", "redisson_lock_token:{loop-basic}", NULL};
    long long t1 = rh_cmd_int(s, counter);
    assert_true(t1 > 0);
    assert_int_equal(rlock_token_ex(lk, ow), (uint64_t)t1);
    tl_lock_now(l, lk, ow, -1);
    assert_int_equal(hold_count(s, "loop-basic", ow), 2);
    assert_int_equal(rlock_token_ex(lk, ow), (uint64_t)t1); /* a re-entry keeps it */
    tl_unlock_now(l, lk, ow, RLOCK_OK);
    assert_int_equal(hold_count(s, "loop-basic", ow), 1);
    tl_unlock_now(l, lk, ow, RLOCK_OK);
    const char *exists[] = {"EXISTS", "loop-basic", NULL};
    assert_int_equal(rh_cmd_int(s, exists), 0);
    assert_int_equal(rlock_token_ex(lk, ow), 0);
    tl_unlock_now(l, lk, ow, RLOCK_ENOTOWNER);
    assert_int_equal(threads_now(), before);
    /* The observation core counted both acquire calls, one hold, now released. */
    assert_int_equal(tc_metric(c, "rlock_acquire_total", "kind=\"reentrant\"", "result=\"ok\""), 2);
    assert_int_equal(tc_metric(c, "rlock_holds", "kind=\"reentrant\"", NULL), 0);
    assert_int_equal(tc_metric(c, "rlock_waiters", "kind=\"reentrant\"", NULL), 0);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
    assert_int_equal(threads_now(), before);
}

/* A loop client waits while another loop client holds, and while a threaded client holds: each
 * release wakes it by message (the holds' leases are 30 s, so a wake-up by its timer would come
 * far too late). */
static void test_handoff(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "loop-handoff");
    rlock *lb = tc_open(b, RLOCK_REENTRANT, "loop-handoff");
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, 30000, NULL, &d), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(d.calls, 0); /* excluded */
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, la, oa, RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_OK);
    assert_true(d.at_ms - t0 < 3000);
    assert_int_equal(hold_count(s, "loop-handoff", ob), 1);
    tl_unlock_now(l, lb, ob, RLOCK_OK);

    /* A threaded client's hold and release. */
    rlock_options to;
    tc_options(&to, s);
    rlock_client *t = tc_client(&to);
    rlock *lt = tc_open(t, RLOCK_REENTRANT, "loop-handoff");
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_OK);
    tl_done e = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, -1, NULL, &e), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(e.calls, 0);
    t0 = tl_now_ms();
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    assert_true(tu_run_until(l, &e.calls, 1, 3000));
    assert_int_equal(e.rc, RLOCK_OK);
    assert_true(e.at_ms - t0 < 3000);
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_ETIMEDOUT); /* the loop owner holds */
    tl_unlock_now(l, lb, ob, RLOCK_OK);
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    rlock_free(lt);
    rlock_client_free(t);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A cancelled waiter gets RLOCK_ECANCELED and has left the channel; a wait with a bound gets
 * RLOCK_ETIMEDOUT at its end; the holder keeps the lock throughout. */
static void test_cancel_and_timeout(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "loop-cancel");
    rlock *lb = tc_open(b, RLOCK_REENTRANT, "loop-cancel");
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    tl_run_for(l, 300); /* the loop sends the SUBSCRIBE */
    assert_int_equal(tc_listeners(s, "redisson_lock__channel:{loop-cancel}"), 1);
    tu_after(l, 100, tl_fire, tok);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_ECANCELED);
    tl_run_for(l, 100);
    assert_int_equal(d.calls, 1);
    assert_int_equal(tc_listeners(s, "redisson_lock__channel:{loop-cancel}"), 0);
    assert_int_equal(hold_count(s, "loop-cancel", oa), 1);
    rlock_cancel_free(tok);

    tl_done t = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lb, ob, 300, -1, NULL, &t), RLOCK_OK);
    assert_true(tu_run_until(l, &t.calls, 1, 3000));
    assert_int_equal(t.rc, RLOCK_ETIMEDOUT);
    assert_true(t.at_ms - t0 >= 290);
    assert_int_equal(
        tc_metric(b, "rlock_acquire_total", "kind=\"reentrant\"", "result=\"canceled\""), 1);
    assert_int_equal(
        tc_metric(b, "rlock_acquire_total", "kind=\"reentrant\"", "result=\"timeout\""), 1);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

static void count_lost(const char *name, void *user_data)
{
    assert_string_equal(name, "loop-watchdog");
    (*(int *)user_data)++;
}

/* A watchdog hold outlives several leases: the loop's timer renews it; a hold whose key was
 * deleted is reported lost, to the figures and to the client's on_lost, once. */
static void test_watchdog(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options o;
    tc_options(&o, s);
    o.watchdog_timeout_ms = 150;
    int lost = 0;
    o.on_lost = count_lost;
    o.user_data = &lost;
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-watchdog");
    rlock_owner *ow = tl_owner(c);
    tl_lock_now(l, lk, ow, -1);
    tl_run_for(l, 600);
    assert_int_equal(hold_count(s, "loop-watchdog", ow), 1);
    const char *pttl[] = {"PTTL", "loop-watchdog", NULL};
    long long left = rh_cmd_int(s, pttl);
    assert_true(left > 0 && left <= 150);
    tl_unlock_now(l, lk, ow, RLOCK_OK);
    /* A hold whose key vanishes is found lost by the next renewal, counted and forgotten. */
    tl_lock_now(l, lk, ow, -1);
    const char *del[] = {"DEL", "loop-watchdog", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    tl_run_for(l, 250);
    assert_int_equal(tc_metric(c, "rlock_lost_total", "kind=\"reentrant\"", NULL), 1);
    assert_int_equal(lost, 1);
    assert_int_equal(tc_metric(c, "rlock_holds", "kind=\"reentrant\"", NULL), 0);
    tl_unlock_now(l, lk, ow, RLOCK_ELOST);
    tl_unlock_now(l, lk, ow, RLOCK_ENOTOWNER);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Freeing a client with waits and a release pending completes each once with RLOCK_ECLOSED,
 * from the free; nothing runs after it, and the loop ends with every handle closed. */
static void test_free_pending(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "loop-free");
    rlock *lb = tc_open(b, RLOCK_REENTRANT, "loop-free");
    rlock_owner *oa = tl_owner(a), *ob[3] = {tl_owner(b), tl_owner(b), tl_owner(b)};
    tl_lock_now(l, la, oa, 30000);
    tl_done d[4] = {{0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tl_lock_async(lb, ob[i], RLOCK_WAIT_FOREVER, -1, NULL, &d[i]), RLOCK_OK);
    }
    tl_run_for(l, 300);
    /* One more whose attempt is still on its way when the client goes. */
    assert_int_equal(tl_lock_async(lb, ob[0], RLOCK_WAIT_FOREVER, -1, NULL, &d[3]), RLOCK_OK);
    rlock_client_free(b);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].rc, RLOCK_ECLOSED);
    }
    tl_done u = {0};
    assert_int_equal(tl_unlock_async(la, oa, &u), RLOCK_OK);
    rlock_client_free(a);
    assert_int_equal(u.calls, 1);
    assert_int_equal(u.rc, RLOCK_ECLOSED);
    assert_int_equal(tl_lock_async(la, oa, 0, -1, NULL, &u), RLOCK_ECLOSED);
    tl_run_for(l, 200);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].calls, 1);
    }
    assert_int_equal(u.calls, 1);
    for (int i = 0; i < 3; i++) {
        rlock_owner_free(ob[i]);
    }
    rlock_owner_free(oa);
    rlock_free(la);
    rlock_free(lb);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A token fired right after the call, while its attempt is on its way: done reports what Redis
 * did, OK with the lock held or RLOCK_ECANCELED with nothing held (never a hold unreported). */
static void test_cancel_races_grant(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-race");
    rlock_owner *ow = tl_owner(c);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, ow, RLOCK_WAIT_FOREVER, -1, tok, &d), RLOCK_OK);
    rlock_cancel_fire(tok);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    tl_run_for(l, 50);
    assert_int_equal(d.calls, 1);
    assert_true(d.rc == RLOCK_OK || d.rc == RLOCK_ECANCELED);
    assert_int_equal(hold_count(s, "loop-race", ow), d.rc == RLOCK_OK ? 1 : 0);
    if (d.rc == RLOCK_OK) {
        tl_unlock_now(l, lk, ow, RLOCK_OK);
    }
    rlock_cancel_free(tok);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A request in flight when the server dies completes once with RLOCK_ECONN; after a restart on
 * the same port the client dials again and works. */
static void test_restart(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-restart");
    rlock_owner *ow = tl_owner(c);
    tl_lock_now(l, lk, ow, 30000);
    assert_int_equal(rh_stop(s), 0);
    tl_done d = {0};
    assert_int_equal(tl_unlock_async(lk, ow, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_ECONN);
    assert_int_equal(rh_restart(s), 0);
    tl_lock_now(l, lk, ow, 30000); /* the data set is empty after the restart */
    assert_int_equal(hold_count(s, "loop-restart", ow), 1);
    tl_unlock_now(l, lk, ow, RLOCK_OK);
    tl_run_for(l, 50);
    assert_int_equal(d.calls, 1);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A server that stops answering (SIGSTOP): a request in flight completes with RLOCK_ECONN once
 * command_timeout_ms passed, not never; after SIGCONT the client dials again and works. */
static void test_stalled_server(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options o;
    tc_options(&o, s);
    o.command_timeout_ms = 300;
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-stalled");
    rlock *other = tc_open(c, RLOCK_REENTRANT, "loop-stalled-2");
    rlock_owner *ow = tl_owner(c);
    tl_lock_now(l, lk, ow, 30000);
    assert_int_equal(rh_pause(s), 0);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_unlock_async(lk, ow, &d), RLOCK_OK);
    int got = tu_run_until(l, &d.calls, 1, 3000);
    assert_int_equal(rh_resume(s), 0);
    assert_true(got);
    assert_int_equal(d.rc, RLOCK_ECONN);
    assert_true(d.at_ms - t0 >= 250);
    tl_lock_now(l, other, ow, 30000);
    tl_unlock_now(l, other, ow, RLOCK_OK);
    assert_int_equal(d.calls, 1);
    rlock_owner_free(ow);
    rlock_free(other);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* The pub/sub connection killed under a waiter: the client redials and resubscribes, so the
 * next release still wakes the waiter by message (the holder's lease is 30 s). */
static void test_sub_reconnect(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0), *b = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "loop-resub");
    rlock *lb = tc_open(b, RLOCK_REENTRANT, "loop-resub");
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    tl_lock_now(l, la, oa, 30000);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lb, ob, RLOCK_WAIT_FOREVER, 30000, NULL, &d), RLOCK_OK);
    tl_run_for(l, 300);
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
    assert_int_equal(rh_cmd_int(s, kill), 1);
    tl_run_for(l, 500);
    assert_int_equal(tc_listeners(s, "redisson_lock__channel:{loop-resub}"), 1);
    assert_int_equal(d.calls, 0);
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, la, oa, RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_OK);
    assert_true(d.at_ms - t0 < 3000);
    tl_unlock_now(l, lb, ob, RLOCK_OK);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* ---- stress: owners of two loop clients take and release three names in turns ---------- */

#define ST_CLIENTS 2
#define ST_OWNERS  10 /* per client */
#define ST_NAMES   3
#define ST_ROUNDS  50

typedef struct st_owner st_owner;
typedef struct st_run {
    tu_loop *l;
    rlock *locks[ST_CLIENTS][ST_NAMES];
    int holder[ST_NAMES]; /* the independent checker: who holds each name now (-1: nobody) */
    int overlaps, errors, finished, grants;
} st_run;

struct st_owner {
    st_run *run;
    int id, client, name, round;
    rlock_owner *owner;
    int in_lock, in_unlock; /* a done of that kind is due: a second one is an error */
};

static void st_next(st_owner *o);

static void st_unlocked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    st_owner *o = user_data;
    o->run->errors += rc != RLOCK_OK || !o->in_unlock;
    o->in_unlock = 0;
    if (++o->round == ST_ROUNDS) {
        o->run->finished++;
        return;
    }
    st_next(o);
}

static void st_release(void *arg)
{
    st_owner *o = arg;
    st_run *r = o->run;
    r->holder[o->name] = -1; /* cleared before the release can let the next holder in */
    o->in_unlock = 1;
    if (rlock_unlock_async(r->locks[o->client][o->name], o->owner, st_unlocked, o) != RLOCK_OK) {
        r->errors++;
    }
}

static void st_locked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    st_owner *o = user_data;
    st_run *r = o->run;
    r->errors += rc != RLOCK_OK || !o->in_lock;
    o->in_lock = 0;
    if (rc != RLOCK_OK) {
        return;
    }
    r->grants++;
    r->overlaps += r->holder[o->name] != -1;
    r->holder[o->name] = o->id;
    tu_after(r->l, o->round % 2, st_release, o); /* hold for 0 or 1 ms */
}

static void st_next(st_owner *o)
{
    st_run *r = o->run;
    o->name = (o->id + o->round) % ST_NAMES;
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = o->owner;
    o->in_lock = 1;
    if (rlock_lock_async(r->locks[o->client][o->name], &a, st_locked, o) != RLOCK_OK) {
        r->errors++;
    }
}

/* Every acquisition granted once, no two holders of a name at once by an independent checker,
 * every done exactly once; 1,000 contended hand-offs by message. */
static void test_stress(void **state)
{
    rh_server *s = *state;
    static const char *const names[ST_NAMES] = {"loop-st-a", "loop-st-b", "loop-st-c"};
    st_run run = {.l = tu_loop_new()};
    assert_non_null(run.l);
    rlock_client *c[ST_CLIENTS];
    st_owner owners[ST_CLIENTS * ST_OWNERS];
    for (int i = 0; i < ST_CLIENTS; i++) {
        c[i] = loop_client(run.l, s, 0);
        for (int n = 0; n < ST_NAMES; n++) {
            run.locks[i][n] = tc_open(c[i], RLOCK_REENTRANT, names[n]);
        }
    }
    for (int n = 0; n < ST_NAMES; n++) {
        run.holder[n] = -1;
    }
    for (int i = 0; i < ST_CLIENTS * ST_OWNERS; i++) {
        owners[i] = (st_owner){.run = &run, .id = i, .client = i % ST_CLIENTS};
        owners[i].owner = tl_owner(c[owners[i].client]);
        st_next(&owners[i]);
    }
    int64_t t0 = tl_now_ms();
    assert_true(tu_run_until(run.l, &run.finished, ST_CLIENTS * ST_OWNERS, 30000));
    printf("loop stress: %d grants in %lld ms\n", run.grants, (long long)(tl_now_ms() - t0));
    assert_int_equal(run.errors, 0);
    assert_int_equal(run.overlaps, 0);
    assert_int_equal(run.grants, ST_CLIENTS * ST_OWNERS * ST_ROUNDS);
    for (int i = 0; i < ST_CLIENTS * ST_OWNERS; i++) {
        rlock_owner_free(owners[i].owner);
    }
    for (int i = 0; i < ST_CLIENTS; i++) {
        for (int n = 0; n < ST_NAMES; n++) {
            rlock_free(run.locks[i][n]);
        }
        rlock_client_free(c[i]);
    }
    assert_int_equal(tu_loop_close(run.l), 0);
}

typedef struct free_in_done {
    rlock_client *c;
    tl_done d;
} free_in_done;

static void done_frees_client(rlock *lock, int rc, void *user_data)
{
    free_in_done *f = user_data;
    tl_lock_done(lock, rc, &f->d);
    rlock_client_free(f->c);
}

/* A done that frees its client, called from the cancellation's wake-up and from a channel's
 * wake-up round: the client goes at once and nothing of it is touched afterwards (ASan). */
static void test_free_in_done(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s, 0);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "loop-free-in-done");
    rlock_owner *oa = tl_owner(a);
    tl_lock_now(l, la, oa, 30000);
    for (int round = 0; round < 2; round++) {
        free_in_done f = {.c = loop_client(l, s, 0)};
        rlock *lb = tc_open(f.c, RLOCK_REENTRANT, "loop-free-in-done");
        rlock_owner *ob[2] = {tl_owner(f.c), tl_owner(f.c)};
        rlock_cancel *tok = NULL;
        assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
        tl_done other = {0};
        rlock_lock_args args;
        rlock_lock_args_init(&args);
        args.owner = ob[0];
        args.cancel = round == 0 ? tok : NULL;
        /* f's waiter waits first, so that in round 1 the release grants it the lock. */
        assert_int_equal(rlock_lock_async(lb, &args, done_frees_client, &f), RLOCK_OK);
        tl_run_for(l, 150);
        assert_int_equal(tl_lock_async(lb, ob[1], RLOCK_WAIT_FOREVER, 30000, NULL, &other),
                         RLOCK_OK);
        tl_run_for(l, 150);
        if (round == 0) {
            rlock_cancel_fire(tok); /* the pipe's wake-up cancels the first waiter */
        } else {
            tl_unlock_now(l, la, oa, RLOCK_OK); /* the wake channel's grant goes to f's */
        }
        assert_true(tu_run_until(l, &f.d.calls, 1, 3000));
        tl_run_for(l, 100);
        assert_int_equal(f.d.calls, 1);
        assert_int_equal(f.d.rc, round == 0 ? RLOCK_ECANCELED : RLOCK_OK);
        assert_int_equal(other.calls, 1);
        assert_true(other.rc == RLOCK_ECLOSED || other.rc == RLOCK_OK);
        if (round == 1 && other.rc == RLOCK_OK) {
            const char *del[] = {"DEL", "loop-free-in-done", NULL};
            (void)rh_cmd_int(s, del);
        }
        rlock_cancel_free(tok);
        rlock_owner_free(ob[0]);
        rlock_owner_free(ob[1]);
        rlock_free(lb);
    }
    rlock_owner_free(oa);
    rlock_free(la);
    rlock_client_free(a);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A fake server in a child process on a free loopback port: it answers the first bytes it
 * reads with an array header announcing 444,444,443 elements and then stays silent. */
static pid_t fake_server(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int c = accept(fd, NULL, NULL);
        char buf[4096];
        if (c >= 0 && read(c, buf, sizeof(buf)) > 0) {
            ssize_t n = write(c, "*444444443\r\n", 12);
            (void)n;
        }
        sleep(30);
        _exit(0);
    }
    close(fd);
    return pid;
}

/* A reply announcing a huge array is refused before hiredis allocates for it: RLOCK_EPROTO at
 * once, not an allocation of gigabytes and a wait for the rest. */
static void test_huge_reply(void **state)
{
    (void)state;
    int port = 0;
    pid_t pid = fake_server(&port);
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-huge");
    rlock_owner *ow = tl_owner(c);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, ow, 0, -1, NULL, &d), RLOCK_OK);
    int got = tu_run_until(l, &d.calls, 1, 2000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(got);
    assert_int_equal(d.rc, RLOCK_EPROTO);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A loop client inherited by a child of fork() is closed there: its loop is the parent's, and
 * using it must not start a threaded client's threads. */
static void test_fork_child(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "loop-fork");
    rlock_owner *ow = tl_owner(c);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int before = threads_now();
        rlock *h = rlock_open(c, RLOCK_REENTRANT, "loop-fork");
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.owner = ow;
        tl_done d = {0};
        int rc = rlock_lock_async(lk, &a, tl_lock_done, &d);
        _exit(h == NULL && rc == RLOCK_ECLOSED && threads_now() == before ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tl_lock_now(l, lk, ow, -1); /* the parent's client is untouched */
    tl_unlock_now(l, lk, ow, RLOCK_OK);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* One server for the program (each test uses names of its own; the tests that restart, stop
 * or kill connections of the server come last). */
TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_checks),
        cmocka_unit_test(test_lock_unlock_no_thread), cmocka_unit_test(test_handoff),
        cmocka_unit_test(test_cancel_and_timeout), cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_free_pending), cmocka_unit_test(test_cancel_races_grant),
        cmocka_unit_test(test_fork_child), cmocka_unit_test(test_free_in_done),
        cmocka_unit_test(test_huge_reply), cmocka_unit_test(test_stress),
        cmocka_unit_test(test_sub_reconnect), cmocka_unit_test(test_stalled_server),
        cmocka_unit_test(test_restart))
