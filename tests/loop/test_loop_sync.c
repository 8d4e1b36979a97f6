/*
 * Semaphores and the count-down latch on loop clients through an adapter (tl_loop.h: libuv or
 * libevent) against a real redis-server: the argument checks, permits taken and returned with a
 * threaded client sharing the data, a waiter woken by another client's release, leased permits
 * with their id and lease, time-outs, cancellation (and a token that races a grant), awaits
 * opened by count-downs from a loop and a threaded client (and ended by time-out and token), and
 * a free with pending operations.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tl_common.h"
#include "tl_loop.h"
#include "tc_redis.h"

static int acquire(rlock_semaphore *s, int64_t n, int64_t wait_ms, rlock_cancel *tok, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_semaphore_acquire_async(s, n, wait_ms, tok, tl_sem_done, d);
    d->inside = 0;
    return rc;
}

static int acquire_leased(rlock_semaphore *s, int64_t wait_ms, int64_t lease_ms, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_semaphore_acquire_leased_async(s, wait_ms, lease_ms, NULL, tl_leased_done, d);
    d->inside = 0;
    return rc;
}

static int release(rlock_semaphore *s, int64_t n, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_semaphore_release_async(s, n, tl_sem_done, d);
    d->inside = 0;
    return rc;
}

static int release_leased(rlock_semaphore *s, const char *id, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_semaphore_release_leased_async(s, id, tl_sem_done, d);
    d->inside = 0;
    return rc;
}

static int await(rlock_latch *lt, int64_t wait_ms, rlock_cancel *tok, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_latch_await_async(lt, wait_ms, tok, tl_latch_done, d);
    d->inside = 0;
    return rc;
}

static int count_down(rlock_latch *lt, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_latch_count_down_async(lt, tl_latch_done, d);
    d->inside = 0;
    return rc;
}

static rlock_client *loop_client(tu_loop *l, rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tl_client(l, &o);
}

static rlock_client *threaded_client(rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tc_client(&o);
}

static long long get_int(rh_server *s, const char *key)
{
    const char *argv[] = {"GET", key, NULL};
    char *v = rh_cmd_str(s, argv);
    long long n = v != NULL ? atoll(v) : -1;
    free(v);
    return n;
}

/* Pauses the server's clients for ms (CLIENT PAUSE ... ALL): the requests the loop sends
 * meanwhile are answered only after it. */
static void pause_server(rh_server *s, int ms)
{
    char arg[24];
    snprintf(arg, sizeof(arg), "%d", ms);
    const char *argv[] = {"CLIENT", "PAUSE", arg, "ALL", NULL};
    char *ok = rh_cmd_str(s, argv);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
}

/* Bad input is refused with RLOCK_EINVAL (a fired token: RLOCK_ECANCELED), done never runs; a
 * threaded client's handle is refused, and a loop client's blocking semaphore calls too. */
static void test_checks(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "ls-checks");
    rlock_semaphore *tsem = rlock_semaphore_open(t, "ls-checks");
    rlock_latch *lt = rlock_latch_open(c, "ll-checks"), *tlt = rlock_latch_open(t, "ll-checks");
    assert_true(sem != NULL && tsem != NULL && lt != NULL && tlt != NULL);
    tl_done d = {0};
    assert_int_equal(acquire(NULL, 1, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_async(sem, 1, 0, NULL, NULL, NULL), RLOCK_EINVAL);
    assert_int_equal(acquire(sem, 0, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(acquire(sem, -3, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(acquire(sem, 1, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(acquire(tsem, 1, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(acquire_leased(sem, 0, 0, &d), RLOCK_EINVAL);
    assert_int_equal(acquire_leased(sem, 0, RLOCK_MAX_DURATION_MS + 1, &d), RLOCK_EINVAL);
    assert_int_equal(acquire_leased(sem, -1, 1000, &d), RLOCK_EINVAL);
    assert_int_equal(acquire_leased(tsem, 0, 1000, &d), RLOCK_EINVAL);
    assert_int_equal(release(sem, 0, &d), RLOCK_EINVAL);
    assert_int_equal(release(NULL, 1, &d), RLOCK_EINVAL);
    assert_int_equal(release(tsem, 1, &d), RLOCK_EINVAL);
    assert_int_equal(release_leased(sem, "not-an-id", &d), RLOCK_EINVAL);
    assert_int_equal(release_leased(sem, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(await(NULL, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(await(lt, -1, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(await(tlt, 0, NULL, &d), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_await_async(lt, 0, NULL, NULL, NULL), RLOCK_EINVAL);
    assert_int_equal(count_down(NULL, &d), RLOCK_EINVAL);
    assert_int_equal(count_down(tlt, &d), RLOCK_EINVAL);
    rlock_cancel *fired = NULL;
    assert_int_equal(rlock_cancel_new(&fired), RLOCK_OK);
    rlock_cancel_fire(fired);
    assert_int_equal(acquire(sem, 1, 0, fired, &d), RLOCK_ECANCELED);
    assert_int_equal(await(lt, 0, fired, &d), RLOCK_ECANCELED);
    rlock_cancel_free(fired);
    assert_int_equal(rlock_semaphore_acquire(sem, 1, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_count_down(lt), RLOCK_EINVAL);
    tl_run_for(l, 50);
    assert_int_equal(d.calls, 0);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(tsem);
    rlock_latch_free(lt);
    rlock_latch_free(tlt);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Permits taken and returned on the loop are the threaded client's (one counter on Redis); a
 * loop waiter is woken by the release of a threaded client and of another loop client, by
 * message (well before the subscription timeout's poll). */
static void test_acquire_release(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *b = loop_client(l, s), *t = threaded_client(s);
    rlock_semaphore *sa = rlock_semaphore_open(a, "ls-basic");
    rlock_semaphore *sb = rlock_semaphore_open(b, "ls-basic");
    rlock_semaphore *st = rlock_semaphore_open(t, "ls-basic");
    assert_int_equal(rlock_semaphore_try_set_permits(st, 2), 1);
    tl_done d = {0};
    assert_int_equal(acquire(sa, 2, 0, NULL, &d), RLOCK_OK);
    assert_int_equal(d.calls, 0);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(st), 0);
    /* A waiter on the loop, woken by the threaded client's release. */
    tl_done w = {0};
    assert_int_equal(acquire(sb, 1, RLOCK_WAIT_FOREVER, NULL, &w), RLOCK_OK);
    tl_run_for(l, 200); /* the loop sends the SUBSCRIBE */
    assert_int_equal(tc_numsub(s, "redisson_sc:{ls-basic}"), 1);
    tl_run_for(l, 100);
    assert_int_equal(w.calls, 0);
    int64_t t0 = tl_now_ms();
    assert_int_equal(rlock_semaphore_release(st, 1), RLOCK_OK);
    tl_wait_done(l, &w, RLOCK_OK);
    assert_true(w.at_ms - t0 < 2000);
    assert_int_equal(get_int(s, "ls-basic"), 0);
    /* Another waiter, woken by a loop client's release of two permits. */
    tl_done w2 = {0}, r = {0};
    assert_int_equal(acquire(sb, 2, RLOCK_WAIT_FOREVER, NULL, &w2), RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(w2.calls, 0);
    t0 = tl_now_ms();
    assert_int_equal(release(sa, 2, &r), RLOCK_OK);
    tl_wait_done(l, &r, RLOCK_OK);
    tl_wait_done(l, &w2, RLOCK_OK);
    assert_true(w2.at_ms - t0 < 2000);
    assert_int_equal(get_int(s, "ls-basic"), 0);
    tl_done r2 = {0};
    assert_int_equal(release(sb, 3, &r2), RLOCK_OK);
    tl_wait_done(l, &r2, RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(st), 3);
    tl_run_for(l, 100); /* the last waiter left the channel */
    assert_int_equal(tc_numsub(s, "redisson_sc:{ls-basic}"), 0);
    rlock_semaphore_free(sa);
    rlock_semaphore_free(sb);
    rlock_semaphore_free(st);
    rlock_client_free(a);
    rlock_client_free(b);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

static int is_hex_id(const char *id)
{
    if (strlen(id) != RLOCK_PERMIT_ID_LEN) {
        return 0;
    }
    for (const char *p = id; *p != '\0'; p++) {
        if (!isxdigit((unsigned char)*p)) {
            return 0;
        }
    }
    return 1;
}

/* A leased permit: its id (as the threaded client sees it, with its lease), its release and a
 * second release of it (RLOCK_ENOTOWNER); a waiter for the last permit gets it when the
 * holder's lease runs out (nobody publishes then: the attempt's hint wakes it). */
static void test_leased(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "ls-leased");
    rlock_semaphore *st = rlock_semaphore_open(t, "ls-leased");
    assert_int_equal(rlock_semaphore_try_set_permits(st, 1), 1);
    tl_done d = {0};
    assert_int_equal(acquire_leased(sem, 0, 5000, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(is_hex_id(d.id));
    int64_t left = 0;
    assert_int_equal(rlock_semaphore_remaining_lease_ms(st, d.id, &left), RLOCK_OK);
    assert_true(left > 3000 && left <= 5000);
    assert_int_equal(rlock_semaphore_acquired(st), 1);
    tl_done r = {0}, r2 = {0};
    assert_int_equal(release_leased(sem, d.id, &r), RLOCK_OK);
    tl_wait_done(l, &r, RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquired(st), 0);
    assert_int_equal(release_leased(sem, d.id, &r2), RLOCK_OK);
    tl_wait_done(l, &r2, RLOCK_ENOTOWNER);
    /* The last permit on a short lease, and a waiter that gets it when the lease runs out. */
    tl_done h = {0}, w = {0};
    assert_int_equal(acquire_leased(sem, 0, 300, &h), RLOCK_OK);
    tl_wait_done(l, &h, RLOCK_OK);
    int64_t t0 = tl_now_ms();
    assert_int_equal(acquire_leased(sem, 3000, 5000, &w), RLOCK_OK);
    tl_wait_done(l, &w, RLOCK_OK);
    assert_true(w.at_ms - t0 >= 200 && w.at_ms - t0 < 2000);
    assert_string_not_equal(w.id, h.id);
    tl_done r3 = {0};
    assert_int_equal(release_leased(sem, w.id, &r3), RLOCK_OK);
    tl_wait_done(l, &r3, RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(st), 1);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A bounded wait ends with RLOCK_ETIMEDOUT; a fired token with RLOCK_ECANCELED, the waiter off
 * the channel and no permit taken; a token fired while the attempt that takes the permit is on
 * its way reports the grant (RLOCK_OK: the caller holds it, nothing is taken unseen). */
static void test_timeout_cancel(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "ls-cancel");
    rlock_semaphore *st = rlock_semaphore_open(t, "ls-cancel");
    assert_int_equal(rlock_semaphore_try_set_permits(st, 1), 1);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(acquire(sem, 2, 300, NULL, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_ETIMEDOUT);
    assert_true(d.at_ms - t0 >= 290);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done w = {0};
    assert_int_equal(acquire(sem, 2, RLOCK_WAIT_FOREVER, tok, &w), RLOCK_OK);
    tl_run_for(l, 200); /* the loop sends the SUBSCRIBE */
    assert_int_equal(tc_numsub(s, "redisson_sc:{ls-cancel}"), 1);
    tu_after(l, 100, tl_fire, tok);
    tl_wait_done(l, &w, RLOCK_ECANCELED);
    tl_run_for(l, 100); /* the UNSUBSCRIBE */
    assert_int_equal(tc_numsub(s, "redisson_sc:{ls-cancel}"), 0);
    assert_int_equal(rlock_semaphore_available(st), 1);
    rlock_cancel_free(tok);
    /* The race: fired while the attempt that takes the permit waits behind paused clients, so
     * the loop hears of the token before the attempt's reply. */
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done g = {0};
    pause_server(s, 300);
    assert_int_equal(acquire(sem, 1, RLOCK_WAIT_FOREVER, tok, &g), RLOCK_OK);
    rlock_cancel_fire(tok);
    tl_wait_done(l, &g, RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(st), 0);
    rlock_cancel_free(tok);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

typedef struct resume_arg {
    rh_server *s;
    int done;
} resume_arg;

static void resume_cb(void *arg)
{
    resume_arg *r = arg;
    assert_int_equal(rh_resume(r->s), 0);
    r->done = 1;
}

/* An acquire whose reply is lost: the server is stopped with the attempt in its socket, the
 * client gives up on the reply after command_timeout_ms, and the server runs the attempt when it
 * runs again. The call is settled on Redis from a new connection, so done reports what Redis
 * holds: the permits taken and kept (RLOCK_OK), or none taken (RLOCK_ECONN; the settlement ran
 * first and cancelled the call), never permits taken unseen. */
static void test_lost_reply(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options o;
    tc_options(&o, s);
    o.command_timeout_ms = 300;
    rlock_client *c = NULL, *t = threaded_client(s);
    assert_int_equal(tu_client_new(l, &o, &c), RLOCK_OK);
    rlock_semaphore *sem = rlock_semaphore_open(c, "ls-lost");
    rlock_semaphore *st = rlock_semaphore_open(t, "ls-lost");
    assert_int_equal(rlock_semaphore_try_set_permits(st, 1), 1);
    tl_done warm = {0}, d = {0};
    assert_int_equal(release(sem, 1, &warm), RLOCK_OK); /* the data connection is up */
    tl_wait_done(l, &warm, RLOCK_OK);
    assert_int_equal(rh_pause(s), 0);
    assert_int_equal(acquire(sem, 2, RLOCK_WAIT_FOREVER, NULL, &d), RLOCK_OK);
    resume_arg ra = {s, 0};
    tu_after(l, 450, resume_cb, &ra);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    assert_true(tu_run_until(l, &ra.done, 1, 5000)); /* the server ran what it had received */
    tl_run_for(l, 100);
    assert_int_equal(d.calls, 1);
    assert_true(d.rc == RLOCK_OK || d.rc == RLOCK_ECONN);
    assert_int_equal(rlock_semaphore_available(st), d.rc == RLOCK_OK ? 0 : 2);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Awaits opened by count-downs: two loop awaiters stay while the count is 1 after a loop
 * count-down and open together at the threaded client's; an await on an open latch succeeds at
 * its first read; a loop count-down opens another loop client's await. */
static void test_latch(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *b = loop_client(l, s), *t = threaded_client(s);
    rlock_latch *la = rlock_latch_open(a, "ll-basic"), *lb = rlock_latch_open(b, "ll-basic");
    rlock_latch *ltt = rlock_latch_open(t, "ll-basic");
    assert_int_equal(rlock_latch_try_set_count(ltt, 2), 1);
    tl_done w[2] = {{0}}, cd = {0};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(await(la, RLOCK_WAIT_FOREVER, NULL, &w[i]), RLOCK_OK);
    }
    assert_int_equal(count_down(lb, &cd), RLOCK_OK);
    tl_wait_done(l, &cd, RLOCK_OK);
    assert_int_equal(rlock_latch_count(ltt), 1);
    tl_run_for(l, 200); /* the loop sends the SUBSCRIBE */
    assert_int_equal(tc_numsub(s, "redisson_countdownlatch__channel__{ll-basic}"), 1);
    tl_run_for(l, 100);
    assert_int_equal(w[0].calls + w[1].calls, 0);
    int64_t t0 = tl_now_ms();
    assert_int_equal(rlock_latch_count_down(ltt), RLOCK_OK);
    for (int i = 0; i < 2; i++) {
        tl_wait_done(l, &w[i], RLOCK_OK);
        assert_true(w[i].at_ms - t0 < 2000);
    }
    tl_done open = {0};
    assert_int_equal(await(lb, 0, NULL, &open), RLOCK_OK);
    assert_int_equal(open.calls, 0);
    tl_wait_done(l, &open, RLOCK_OK);
    /* A loop count-down opens another loop client's await. */
    assert_int_equal(rlock_latch_try_set_count(ltt, 1), 1);
    tl_done wb = {0}, cd2 = {0};
    assert_int_equal(await(lb, 3000, NULL, &wb), RLOCK_OK);
    tl_run_for(l, 100);
    assert_int_equal(wb.calls, 0);
    t0 = tl_now_ms();
    assert_int_equal(count_down(la, &cd2), RLOCK_OK);
    tl_wait_done(l, &cd2, RLOCK_OK);
    tl_wait_done(l, &wb, RLOCK_OK);
    assert_true(wb.at_ms - t0 < 2000);
    rlock_latch_free(la);
    rlock_latch_free(lb);
    rlock_latch_free(ltt);
    rlock_client_free(a);
    rlock_client_free(b);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* An await that times out, and one cancelled by its token (off the channel); the count stays. */
static void test_latch_timeout_cancel(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *a = loop_client(l, s), *t = threaded_client(s);
    rlock_latch *la = rlock_latch_open(a, "ll-cancel"), *ltt = rlock_latch_open(t, "ll-cancel");
    assert_int_equal(rlock_latch_try_set_count(ltt, 1), 1);
    tl_done to = {0}, cw = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(await(la, 200, NULL, &to), RLOCK_OK);
    tl_wait_done(l, &to, RLOCK_ETIMEDOUT);
    assert_true(to.at_ms - t0 >= 190);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    assert_int_equal(await(la, RLOCK_WAIT_FOREVER, tok, &cw), RLOCK_OK);
    tl_run_for(l, 200); /* the loop sends the SUBSCRIBE */
    assert_int_equal(tc_numsub(s, "redisson_countdownlatch__channel__{ll-cancel}"), 1);
    tu_after(l, 100, tl_fire, tok);
    tl_wait_done(l, &cw, RLOCK_ECANCELED);
    tl_run_for(l, 50);
    assert_int_equal(tc_numsub(s, "redisson_countdownlatch__channel__{ll-cancel}"), 0);
    rlock_cancel_free(tok);
    assert_int_equal(rlock_latch_count(ltt), 1);
    rlock_latch_free(la);
    rlock_latch_free(ltt);
    rlock_client_free(a);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Freeing a client with waits and requests pending completes each once with RLOCK_ECLOSED, from
 * the free; nothing runs after it, and later calls answer RLOCK_ECLOSED without done. */
static void test_free_pending(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "ls-free");
    rlock_latch *lt = rlock_latch_open(c, "ll-free"), *ltt = rlock_latch_open(t, "ll-free");
    assert_int_equal(rlock_latch_try_set_count(ltt, 5), 1);
    tl_done d[6] = {{0}};
    assert_int_equal(acquire(sem, 1, RLOCK_WAIT_FOREVER, NULL, &d[0]), RLOCK_OK);
    assert_int_equal(acquire_leased(sem, RLOCK_WAIT_FOREVER, 1000, &d[1]), RLOCK_OK);
    assert_int_equal(await(lt, RLOCK_WAIT_FOREVER, NULL, &d[2]), RLOCK_OK);
    tl_run_for(l, 200); /* waiting on their channels */
    /* Requests still on their way when the client goes. */
    assert_int_equal(acquire(sem, 1, RLOCK_WAIT_FOREVER, NULL, &d[3]), RLOCK_OK);
    assert_int_equal(count_down(lt, &d[4]), RLOCK_OK);
    assert_int_equal(release(sem, 1, &d[5]), RLOCK_OK);
    rlock_client_free(c);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].rc, RLOCK_ECLOSED);
    }
    tl_done late = {0};
    assert_int_equal(acquire(sem, 1, 0, NULL, &late), RLOCK_ECLOSED);
    assert_int_equal(await(lt, 0, NULL, &late), RLOCK_ECLOSED);
    tl_run_for(l, 100);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(d[i].calls, 1);
    }
    assert_int_equal(late.calls, 0);
    rlock_semaphore_free(sem);
    rlock_latch_free(lt);
    rlock_latch_free(ltt);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_checks),
        cmocka_unit_test(test_acquire_release), cmocka_unit_test(test_leased),
        cmocka_unit_test(test_timeout_cancel), cmocka_unit_test(test_lost_reply),
        cmocka_unit_test(test_latch), cmocka_unit_test(test_latch_timeout_cancel),
        cmocka_unit_test(test_free_pending))
