/*
 * Semaphore and latch calls whose reply is lost, on a client with an 800 ms command timeout:
 * "before" a command runs (CLIENT PAUSE WRITE holds it, CLIENT KILL drops its connection) and
 * "after" (the server is stopped while the command is in flight: the client gives up on that
 * connection, and the server runs the command when it runs again, its reply going nowhere). A
 * release, a leased release and a count-down are resent and applied exactly once; an acquire's
 * permits are kept and reported, or the call is cancelled on Redis, or (Redis out of reach past
 * every resend) the handle's next call gives them back: never taken by nobody.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_thread.h"

#define CT_MS    800  /* the client's command timeout: resends stop after it */
#define STALL_MS 1100 /* a stop that the first resend outlasts (< 2 x CT_MS) */
#define LONG_MS  2900 /* a stop longer than the resends (3 x CT_MS): the call settles */
#define LATE_MS  3700 /* a stop longer than the settlement's resends too (4 x CT_MS) */

static rh_server *g_srv;
static rlock_client *g_c;
static atomic_int g_kept;     /* log lines saying an acquire's settlement kept its permits */
static atomic_int g_given;    /* ... that a later call gave them back */
static atomic_int g_deferred; /* ... that the settlement was left to the handle's next call */

static void count_kept(int level, const char *msg, void *user_data)
{
    (void)user_data;
    if (level <= RLOCK_LOG_INFO && strstr(msg, "whose acquire reply was lost") != NULL) {
        atomic_fetch_add(&g_kept, 1);
    }
    if (level <= RLOCK_LOG_INFO && strstr(msg, "gave back") != NULL) {
        atomic_fetch_add(&g_given, 1);
    }
    if (level <= RLOCK_LOG_WARN && strstr(msg, "the handle's next call settles it") != NULL) {
        atomic_fetch_add(&g_deferred, 1);
    }
}

static int setup(void **state)
{
    (void)state;
    g_srv = tc_start();
    rlock_options o;
    tc_options(&o, g_srv);
    o.command_timeout_ms = CT_MS;
    o.connect_timeout_ms = CT_MS;
    o.log_fn = count_kept;
    o.log_level = RLOCK_LOG_INFO;
    g_c = tc_client(&o);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rlock_client_free(g_c);
    rh_free(g_srv);
    return 0;
}

static long long get_int(const char *key)
{
    const char *get[] = {"GET", key, NULL};
    char *v = rh_cmd_str(g_srv, get);
    long long n = v != NULL ? atoll(v) : -999;
    free(v);
    return n;
}

static void set_int(const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    const char *set[] = {"SET", key, buf, NULL};
    free(rh_cmd_str(g_srv, set));
}

static long long evalsha_calls(void)
{
    return rh_cmdstat_calls(g_srv, "evalsha");
}

/* Runs fn(arg) on a thread while the server is stopped for stall_ms: the command reaches the
 * server's socket and runs once the server runs again, after the client gave up on it. */
static int run_stopped(int (*fn)(void *), void *arg, int64_t stall_ms)
{
    assert_int_equal(rh_pause(g_srv), 0);
    tc_bg b;
    tc_bg_start(&b, fn, arg);
    rh_sleep_ms(stall_ms);
    assert_int_equal(rh_resume(g_srv), 0);
    return tc_bg_join(&b);
}

/* Runs fn(arg) on a thread while writes are paused for pause_ms (CLIENT PAUSE WRITE: the
 * script waits unrun); with kill_ms >= 0, the client's connections are killed that long after the
 * call started (its command never runs) and the pause ends. */
static int run_paused(int (*fn)(void *), void *arg, int64_t pause_ms, int64_t kill_ms)
{
    redisContext *raw = rh_connect(g_srv);
    assert_non_null(raw);
    redisReply *r = redisCommand(raw, "CLIENT PAUSE %lld WRITE", (long long)pause_ms);
    assert_non_null(r);
    freeReplyObject(r);
    tc_bg b;
    tc_bg_start(&b, fn, arg);
    if (kill_ms >= 0) {
        rh_sleep_ms(kill_ms);
        r = redisCommand(raw, "CLIENT KILL TYPE normal SKIPME yes");
        assert_non_null(r);
        assert_true(r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
        freeReplyObject(r);
        r = redisCommand(raw, "CLIENT UNPAUSE");
        freeReplyObject(r);
    }
    int rc = tc_bg_join(&b);
    redisFree(raw);
    return rc;
}

/* Prints a failed call's detail (thread-local: the caller's thread cannot read it). */
static int shown(int rc)
{
    if (rc != RLOCK_OK) {
        print_message("call returned %d: %s\n", rc, rlock_last_error());
    }
    return rc;
}

static int release_one(void *s)
{
    return shown(rlock_semaphore_release(s, 1));
}

static int acquire_one(void *s)
{
    return shown(rlock_semaphore_acquire(s, 1, 0));
}

static int count_down(void *l)
{
    return shown(rlock_latch_count_down(l));
}

typedef struct leased {
    rlock_semaphore *s;
    char id[RLOCK_PERMIT_ID_LEN + 1];
} leased;

static int acquire_leased(void *arg)
{
    leased *p = arg;
    return shown(rlock_semaphore_acquire_leased(p->s, 0, 10000, p->id));
}

static int release_leased(void *arg)
{
    leased *p = arg;
    return shown(rlock_semaphore_release_leased(p->s, p->id));
}

/* Killed before it ran: the release is sent again and returns the permit once. */
static void test_release_killed_before_run(void **state)
{
    (void)state;
    set_int("lr:before", 0);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:before");
    int rc = run_paused(release_one, s, 2000, 200);
    assert_int_equal(rc, RLOCK_OK);
    assert_int_equal(get_int("lr:before"), 1);
    assert_int_equal(rlock_semaphore_available(s), 1);
    rlock_semaphore_free(s);
}

/* Ran with its reply lost: the resend finds it done and does not release again. */
static void test_release_reply_lost_after_run(void **state)
{
    (void)state;
    set_int("lr:after", 0);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:after");
    long long calls = evalsha_calls();
    int rc = run_stopped(release_one, s, STALL_MS);
    assert_int_equal(rc, RLOCK_OK);
    print_message("evalsha calls: %lld\n", evalsha_calls() - calls);
    /* Both copies ran on Redis (the first reply was lost), the permit came back once. */
    assert_true(evalsha_calls() - calls >= 2);
    assert_int_equal(get_int("lr:after"), 1);
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    assert_int_equal(get_int("lr:after"), 2);
    rlock_semaphore_free(s);
}

static void test_leased_release_reply_lost(void **state)
{
    (void)state;
    set_int("lr:leased", 1);
    leased p = {.s = rlock_semaphore_open(g_c, "lr:leased")};
    assert_int_equal(acquire_leased(&p), RLOCK_OK);
    assert_int_equal(get_int("lr:leased"), 0);
    long long calls = evalsha_calls();
    assert_int_equal(run_stopped(release_leased, &p, STALL_MS), RLOCK_OK);
    assert_true(evalsha_calls() - calls >= 2);
    assert_int_equal(get_int("lr:leased"), 1);
    const char *zcard[] = {"ZCARD", "{lr:leased}:timeout", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zcard), 0);
    rlock_semaphore_free(p.s);
}

static void test_count_down_reply_lost(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(g_c, "lr:latch");
    assert_int_equal(rlock_latch_try_set_count(l, 3), 1);
    long long calls = evalsha_calls();
    assert_int_equal(run_stopped(count_down, l, STALL_MS), RLOCK_OK);
    assert_true(evalsha_calls() - calls >= 2);
    assert_int_equal(rlock_latch_count(l), 2);
    assert_int_equal(run_paused(count_down, l, 2000, 200), RLOCK_OK);
    assert_int_equal(rlock_latch_count(l), 1);
    rlock_latch_free(l);
}

/* An acquire that took the permit with its reply lost: the resend reports it taken. */
static void test_acquire_reply_lost_kept(void **state)
{
    (void)state;
    set_int("lr:acq", 1);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:acq");
    assert_int_equal(run_stopped(acquire_one, s, STALL_MS), RLOCK_OK);
    assert_int_equal(get_int("lr:acq"), 0);
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    assert_int_equal(get_int("lr:acq"), 1);
    rlock_semaphore_free(s);
}

static void test_leased_acquire_reply_lost_kept(void **state)
{
    (void)state;
    set_int("lr:lacq", 1);
    leased p = {.s = rlock_semaphore_open(g_c, "lr:lacq")};
    assert_int_equal(run_stopped(acquire_leased, &p, STALL_MS), RLOCK_OK);
    assert_int_equal(get_int("lr:lacq"), 0);
    const char *zcard[] = {"ZCARD", "{lr:lacq}:timeout", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zcard), 1);
    assert_int_equal(rlock_semaphore_release_leased(p.s, p.id), RLOCK_OK);
    assert_int_equal(get_int("lr:lacq"), 1);
    assert_int_equal(rh_cmd_int(g_srv, zcard), 0);
    rlock_semaphore_free(p.s);
}

/* The values of the request keys of name, concatenated ("" when there are none). */
static void request_values(const char *pattern, char *out, size_t size)
{
    const char *keys[] = {"KEYS", pattern, NULL};
    redisReply *r = rh_cmd(g_srv, keys);
    assert_non_null(r);
    out[0] = '\0';
    for (size_t i = 0; i < r->elements; i++) {
        const char *get[] = {"GET", r->element[i]->str, NULL};
        char *v = rh_cmd_str(g_srv, get);
        strncat(out, v != NULL ? v : "?", size - strlen(out) - 1);
        free(v);
    }
    freeReplyObject(r);
}

/* An acquire call that ends without a reply (longer than its resends) has been settled: it
 * reports the permit it took, or it took none and its request is cancelled on Redis. */
static void assert_settled(int rc, const char *name, const char *pattern)
{
    long long avail = get_int(name);
    char req[64];
    request_values(pattern, req, sizeof(req));
    print_message("%s: rc %d (%s), available %lld, request '%s', kept by a settlement %d time(s)\n",
                  name, rc, rlock_strerror(rc), avail, req, atomic_exchange(&g_kept, 0));
    if (rc == RLOCK_OK) {
        assert_int_equal(avail, 0);
        assert_string_equal(req, "1");
    } else {
        assert_int_equal(rc, RLOCK_ECONN);
        assert_int_equal(avail, 1);
        assert_string_equal(req, "0");
    }
}

static void test_acquire_stopped_past_resends_settled(void **state)
{
    (void)state;
    set_int("lr:long", 1);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:long");
    int rc = run_stopped(acquire_one, s, LONG_MS);
    assert_settled(rc, "lr:long", "{lr:long}:rlock_request:*");
    if (rc == RLOCK_OK) {
        assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    }
    assert_int_equal(get_int("lr:long"), 1);
    rlock_semaphore_free(s);
}

static void test_acquire_paused_past_resends_cancelled(void **state)
{
    (void)state;
    set_int("lr:paused", 1);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:paused");
    int rc = run_paused(acquire_one, s, 2 * CT_MS + 200, -1);
    assert_settled(rc, "lr:paused", "{lr:paused}:rlock_request:*");
    if (rc == RLOCK_OK) {
        assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    }
    /* The permit is there for the next acquire. */
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    rlock_semaphore_free(s);
}

/* Redis out of reach past the settlement's resends too: the copies the stopped server runs
 * later take the permit for the call that failed, and the handle's next call gives it back. */
static void test_acquire_unsettled_given_back_by_next_call(void **state)
{
    (void)state;
    set_int("lr:late", 1);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "lr:late");
    atomic_store(&g_deferred, 0);
    atomic_store(&g_given, 0);
    assert_int_equal(run_stopped(acquire_one, s, LATE_MS), RLOCK_ECONN);
    assert_int_equal(atomic_load(&g_deferred), 1);
    rh_sleep_ms(200);
    /* The stopped server ran the attempt when it ran again: the permit is taken, by nobody. */
    assert_int_equal(get_int("lr:late"), 0);
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(atomic_load(&g_given), 1);
    assert_int_equal(get_int("lr:late"), 1);
    rlock_semaphore_free(s);
}

typedef struct cancellable {
    rlock_semaphore *s;
    rlock_cancel *tok;
} cancellable;

static int acquire_cancellable(void *arg)
{
    cancellable *c = arg;
    return shown(rlock_semaphore_acquire_ex(c->s, 1, RLOCK_WAIT_FOREVER, c->tok));
}

/* A waiter whose first attempt lost its reply (the resend answered "not acquired"), then
 * cancelled: the call is settled before it returns RLOCK_ECANCELED, so its request is cancelled
 * on Redis and no copy of the attempt still on its way can take a permit released later. */
static void test_acquire_lost_reply_then_cancelled(void **state)
{
    (void)state;
    set_int("lr:cancel", 0);
    cancellable c = {.s = rlock_semaphore_open(g_c, "lr:cancel")};
    assert_int_equal(rlock_cancel_new(&c.tok), RLOCK_OK);
    assert_int_equal(rh_pause(g_srv), 0);
    tc_bg b;
    tc_bg_start(&b, acquire_cancellable, &c);
    rh_sleep_ms(STALL_MS);
    assert_int_equal(rh_resume(g_srv), 0);
    assert_true(tc_wait_numsub(g_srv, "redisson_sc:{lr:cancel}", 1, 5000));
    assert_int_equal(atomic_load(&b.result), TC_BG_RUNNING);
    rlock_cancel_fire(c.tok);
    assert_int_equal(tc_bg_join(&b), RLOCK_ECANCELED);
    char req[64];
    request_values("{lr:cancel}:rlock_request:*", req, sizeof(req));
    assert_string_equal(req, "0");
    assert_int_equal(rlock_semaphore_release(c.s, 1), RLOCK_OK);
    assert_int_equal(get_int("lr:cancel"), 1);
    rlock_cancel_free(c.tok);
    rlock_semaphore_free(c.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_killed_before_run),
        cmocka_unit_test(test_release_reply_lost_after_run),
        cmocka_unit_test(test_leased_release_reply_lost),
        cmocka_unit_test(test_count_down_reply_lost),
        cmocka_unit_test(test_acquire_reply_lost_kept),
        cmocka_unit_test(test_leased_acquire_reply_lost_kept),
        cmocka_unit_test(test_acquire_stopped_past_resends_settled),
        cmocka_unit_test(test_acquire_paused_past_resends_cancelled),
        cmocka_unit_test(test_acquire_unsettled_given_back_by_next_call),
        cmocka_unit_test(test_acquire_lost_reply_then_cancelled),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
