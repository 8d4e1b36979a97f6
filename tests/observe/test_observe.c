/*
 * Observability against a real redis-server: exact counters and histogram counts after known
 * workloads on every lock kind (re-entry, a timeout, a cancellation, a loss forced by deleting
 * the key under a watchdog hold), per-name figures, the event order of a wait-acquire-release
 * cycle, a hook that calls back into rlock (from a caller's thread and the watchdog's), the
 * exposition checked by prometheus_client's parser, and bad input.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "tc_redis.h"
#include "tc_thread.h"

static const char *parser; /* tests/observe/parse_metrics.py */
static rh_server *srv;

/* The value of one series (metric name with its labels, exactly as written) in c's text. */
static double series(rlock_client *c, const char *s)
{
    char *text = NULL;
    assert_int_equal(rlock_metrics_text(c, &text), RLOCK_OK);
    char needle[512];
    snprintf(needle, sizeof(needle), "\n%s ", s);
    const char *at = strstr(text, needle);
    if (at == NULL) {
        rlock_metrics_free(text);
        fail_msg("series %s missing", s);
        return -1;
    }
    double v = strtod(at + strlen(needle), NULL);
    rlock_metrics_free(text);
    return v;
}

static double kind_series(rlock_client *c, const char *metric, const char *kind, const char *more)
{
    char s[256];
    snprintf(s, sizeof(s), "%s{kind=\"%s\"%s%s}", metric, kind, more[0] ? "," : "", more);
    return series(c, s);
}

static double acquired(rlock_client *c, const char *kind, const char *result)
{
    char more[64];
    snprintf(more, sizeof(more), "result=\"%s\"", result);
    return kind_series(c, "rlock_acquire_total", kind, more);
}

/* Per kind: its label and the kind whose hold on another client makes it wait. */
static const struct {
    rlock_kind kind;
    const char *label;
    rlock_kind blocker;
} kinds[] = {
    {RLOCK_REENTRANT, "reentrant", RLOCK_REENTRANT},
    {RLOCK_SPIN, "reentrant", RLOCK_REENTRANT},
    {RLOCK_FAIR, "fair", RLOCK_FAIR},
    {RLOCK_READ, "read", RLOCK_WRITE},
    {RLOCK_WRITE, "write", RLOCK_WRITE},
};

/* Cancels tok after 50 ms (a thread of tc_bg). */
static int fire_later(void *arg)
{
    usleep(50000);
    rlock_cancel_fire(arg);
    return 0;
}

/* One kind's workload on a fresh client: a hold, a re-entered hold, a timeout, a cancellation. */
static void kind_workload(int i)
{
    rlock_client *c = tc_client_defaults(srv);
    rlock_client *other = tc_client_defaults(srv);
    char name[32];
    snprintf(name, sizeof(name), "obs-kind-%d", i);
    rlock *l = tc_open(c, kinds[i].kind, name);
    const char *k = kinds[i].label;
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(kind_series(c, "rlock_holds", k, ""), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 1000, 5000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK); /* a re-entry: no new hold */
    assert_int_equal(kind_series(c, "rlock_holds", k, ""), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(kind_series(c, "rlock_hold_seconds_count", k, ""), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock *b = tc_hold(other, kinds[i].blocker, name);
    assert_int_equal(rlock_try_lock(l, 30, -1), RLOCK_ETIMEDOUT);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    rlock_lock_args args;
    rlock_lock_args_init(&args);
    args.cancel = tok;
    tc_bg bg;
    tc_bg_start(&bg, fire_later, tok);
    assert_int_equal(rlock_lock_ex(l, &args), RLOCK_ECANCELED);
    tc_bg_join(&bg);
    rlock_cancel_free(tok);
    assert_int_equal(acquired(c, k, "ok"), 3);
    assert_int_equal(acquired(c, k, "timeout"), 1);
    assert_int_equal(acquired(c, k, "canceled"), 1);
    assert_int_equal(acquired(c, k, "error"), 0);
    assert_int_equal(kind_series(c, "rlock_acquire_wait_seconds_count", k, ""), 5);
    assert_true(kind_series(c, "rlock_acquire_wait_seconds_bucket", k, "le=\"0.025\"") <= 3);
    assert_int_equal(kind_series(c, "rlock_hold_seconds_count", k, ""), 2);
    assert_int_equal(kind_series(c, "rlock_holds", k, ""), 0);
    assert_int_equal(kind_series(c, "rlock_waiters", k, ""), 0);
    assert_int_equal(kind_series(c, "rlock_lost_total", k, ""), 0);
    const char *bk = kinds[i].blocker == RLOCK_WRITE ? "write" : k;
    assert_int_equal(kind_series(other, "rlock_holds", bk, ""), 1);
    assert_int_equal(rlock_unlock(b), RLOCK_OK);
    rlock_free(b);
    rlock_free(l);
    rlock_client_free(other);
    rlock_client_free(c);
}

static void test_kinds(void **state)
{
    (void)state;
    for (int i = 0; i < (int)(sizeof(kinds) / sizeof(kinds[0])); i++) {
        kind_workload(i);
    }
}

/* A multi-lock counts as multi on its first member's client, its member calls not at all; a
 * RedLock as redlock. */
static void test_groups(void **state)
{
    (void)state;
    rlock_client *c[3];
    rlock *m[3];
    for (int i = 0; i < 3; i++) {
        c[i] = tc_client_defaults(srv);
        char name[32];
        snprintf(name, sizeof(name), "obs-group-%d", i);
        m[i] = tc_open(c[i], RLOCK_REENTRANT, name);
    }
    rlock *multi = rlock_multi_new(m, 3);
    rlock *red = rlock_redlock_new(m, 3);
    assert_non_null(multi);
    assert_non_null(red);
    assert_int_equal(rlock_lock(multi, -1), RLOCK_OK);
    assert_int_equal(kind_series(c[0], "rlock_holds", "multi", ""), 1);
    assert_int_equal(rlock_unlock(multi), RLOCK_OK);
    rlock_client *other = tc_client_defaults(srv);
    rlock *b = tc_hold(other, RLOCK_REENTRANT, "obs-group-2");
    assert_int_equal(rlock_try_lock(multi, 40, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(b), RLOCK_OK);
    assert_int_equal(rlock_lock(red, 10000), RLOCK_OK);
    assert_int_equal(kind_series(c[0], "rlock_holds", "redlock", ""), 1);
    assert_int_equal(rlock_unlock(red), RLOCK_OK);
    assert_int_equal(acquired(c[0], "multi", "ok"), 1);
    assert_int_equal(acquired(c[0], "multi", "timeout"), 1);
    assert_int_equal(kind_series(c[0], "rlock_hold_seconds_count", "multi", ""), 1);
    assert_int_equal(acquired(c[0], "redlock", "ok"), 1);
    assert_int_equal(kind_series(c[0], "rlock_hold_seconds_count", "redlock", ""), 1);
    assert_int_equal(kind_series(c[0], "rlock_holds", "redlock", ""), 0);
    for (int i = 0; i < 3; i++) { /* the members' own calls are the group's */
        assert_int_equal(acquired(c[i], "reentrant", "ok"), 0);
        assert_int_equal(acquired(c[i], "reentrant", "timeout"), 0);
        assert_int_equal(kind_series(c[i], "rlock_holds", "reentrant", ""), 0);
    }
    rlock_free(b);
    rlock_client_free(other);
    rlock_free(red);
    rlock_free(multi);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
        rlock_client_free(c[i]);
    }
}

/* Events as a hook saw them. */
#define EV_MAX 64
typedef struct ev_log {
    pthread_mutex_t mu;
    int n;
    rlock_event ev[EV_MAX];
    char name[EV_MAX][32];
    char owner[EV_MAX][80];
    /* Calls back into rlock from the hook: the text, and a lock+unlock of this handle. */
    rlock_client *reenter_client;
    rlock *reenter_lock;
    int reenter_ok;
} ev_log;

static _Thread_local int in_hook;

static void record(const rlock_event *ev, void *user)
{
    ev_log *log = user;
    if (in_hook) {
        return; /* the events of the hook's own calls */
    }
    in_hook = 1;
    pthread_mutex_lock(&log->mu);
    if (log->n < EV_MAX) {
        log->ev[log->n] = *ev;
        snprintf(log->name[log->n], sizeof(log->name[0]), "%s", ev->name ? ev->name : "");
        snprintf(log->owner[log->n], sizeof(log->owner[0]), "%s", ev->owner ? ev->owner : "");
        log->n++;
    }
    pthread_mutex_unlock(&log->mu);
    if (log->reenter_client != NULL &&
        (ev->type == RLOCK_EV_RELEASED || ev->type == RLOCK_EV_LOST)) {
        char *text = NULL;
        int ok = rlock_metrics_text(log->reenter_client, &text) == RLOCK_OK;
        rlock_metrics_free(text);
        ok = ok && rlock_try_lock(log->reenter_lock, 1000, 5000) == RLOCK_OK;
        ok = ok && rlock_unlock(log->reenter_lock) == RLOCK_OK;
        pthread_mutex_lock(&log->mu);
        log->reenter_ok += ok;
        pthread_mutex_unlock(&log->mu);
    }
    in_hook = 0;
}

/* Waits for the lock, holds it 20 ms, releases it: one thread's cycle. */
static int cycle(void *arg)
{
    int r = rlock_lock(arg, -1);
    usleep(20000);
    return r != RLOCK_OK ? r : rlock_unlock(arg);
}

/* A wait-acquire-release cycle gives WAIT_BEGIN, ACQUIRED (its wait, the token), RELEASED (its
 * hold, the same token), in that order, on the caller's thread; the hook may call rlock. */
static void cycle_events(rlock_kind kind, const char *name)
{
    ev_log log = {.n = 0};
    pthread_mutex_init(&log.mu, NULL);
    rlock_client *c = tc_client_defaults(srv);
    rlock_client *other = tc_client_defaults(srv);
    log.reenter_client = c;
    log.reenter_lock = tc_open(c, RLOCK_REENTRANT, "obs-reenter");
    rlock_client_on_event(c, record, &log);
    rlock *b = tc_hold(other, kind, name);
    rlock *l = tc_open(c, kind, name);
    tc_bg bg;
    tc_bg_start(&bg, cycle, l);
    usleep(100000);
    assert_int_equal(rlock_unlock(b), RLOCK_OK);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    rlock_client_on_event(c, NULL, NULL);
    assert_int_equal(log.n, 3);
    assert_int_equal(log.ev[0].type, RLOCK_EV_WAIT_BEGIN);
    assert_int_equal(log.ev[1].type, RLOCK_EV_ACQUIRED);
    assert_int_equal(log.ev[2].type, RLOCK_EV_RELEASED);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(log.ev[i].kind, kind == RLOCK_FAIR ? RLOCK_MK_FAIR : RLOCK_MK_REENTRANT);
        assert_string_equal(log.name[i], name);
        assert_int_equal(strncmp(log.owner[i], rlock_client_id(c), 36), 0);
    }
    assert_true(log.ev[1].wait_ns >= 90 * 1000000LL);
    assert_int_equal(log.ev[1].result, RLOCK_OK);
    assert_int_equal(log.ev[1].hold_count, 1);
    assert_true(log.ev[1].token > 0);
    assert_true(log.ev[2].token == log.ev[1].token);
    assert_true(log.ev[2].hold_ns >= 15 * 1000000LL);
    assert_int_equal(log.reenter_ok, 1);
    rlock_free(b);
    rlock_free(l);
    rlock_free(log.reenter_lock);
    rlock_client_free(other);
    rlock_client_free(c);
    pthread_mutex_destroy(&log.mu);
}

static void test_event_order(void **state)
{
    (void)state;
    cycle_events(RLOCK_REENTRANT, "obs-cycle");
    cycle_events(RLOCK_FAIR, "obs-cycle-fair");
}

/* Deleting the keys under watchdog holds: each kind's loss is counted once (not again by the
 * unlock that reports it), its hold leaves the gauge, and the LOST event reaches the hook on the
 * watchdog's thread, which may call rlock. */
static void test_forced_loss(void **state)
{
    (void)state;
    ev_log log = {.n = 0};
    pthread_mutex_init(&log.mu, NULL);
    rlock_client *c = tc_client_tuned(srv, 300, 0, NULL, NULL);
    log.reenter_client = c;
    log.reenter_lock = tc_open(c, RLOCK_REENTRANT, "obs-reenter-lost");
    static const rlock_kind lk[4] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    static const char *const label[4] = {"reentrant", "fair", "read", "write"};
    rlock *l[4];
    char names[4][32];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof(names[i]), "obs-lost-%d", i);
        l[i] = tc_hold(c, lk[i], names[i]);
    }
    rlock_client_on_event(c, record, &log);
    for (int i = 0; i < 4; i++) {
        const char *del[] = {"DEL", names[i], NULL};
        assert_int_equal(rh_cmd_int(srv, del), 1);
    }
    int64_t until = rh_now_ms() + 5000;
    int lost = 0;
    while (lost < 4 && rh_now_ms() < until) {
        usleep(20000);
        pthread_mutex_lock(&log.mu);
        lost = log.reenter_ok;
        pthread_mutex_unlock(&log.mu);
    }
    assert_int_equal(lost, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rlock_unlock(l[i]), RLOCK_ELOST);
        assert_int_equal(kind_series(c, "rlock_lost_total", label[i], ""), 1);
        assert_int_equal(kind_series(c, "rlock_holds", label[i], ""), 0);
        /* The only reentrant holds that ended by a release are the hook's four. */
        assert_int_equal(kind_series(c, "rlock_hold_seconds_count", label[i], ""), i == 0 ? 4 : 0);
        rlock_free(l[i]);
    }
    rlock_client_on_event(c, NULL, NULL);
    assert_int_equal(log.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(log.ev[i].type, RLOCK_EV_LOST);
        assert_int_equal(log.ev[i].result, RLOCK_ELOST);
        assert_true(log.ev[i].hold_ns > 0);
    }
    assert_true(series(c, "rlock_renewals_total{result=\"ok\"}") >= 0);
    rlock_free(log.reenter_lock);
    rlock_client_free(c);
    pthread_mutex_destroy(&log.mu);
}

static void count_lost(const char *name, void *user)
{
    (void)name;
    atomic_fetch_add((atomic_int *)user, 1);
}

/* A multi-lock whose member's key is deleted under the watchdog: the loss counts once, as
 * multi, when the group's unlock finds it (the member's own hold is the group's, not counted). */
static void test_multi_loss(void **state)
{
    (void)state;
    atomic_int lost = 0;
    rlock_client *c = tc_client_tuned(srv, 300, 0, count_lost, &lost);
    rlock *m[2] = {tc_open(c, RLOCK_REENTRANT, "obs-ml-0"),
                   tc_open(c, RLOCK_REENTRANT, "obs-ml-1")};
    rlock *g = rlock_multi_new(m, 2);
    assert_non_null(g);
    assert_int_equal(rlock_lock(g, -1), RLOCK_OK);
    const char *del[] = {"DEL", "obs-ml-1", NULL};
    assert_int_equal(rh_cmd_int(srv, del), 1);
    int64_t until = rh_now_ms() + 5000;
    while (atomic_load(&lost) == 0 && rh_now_ms() < until) {
        usleep(20000);
    }
    assert_int_equal(atomic_load(&lost), 1);
    assert_int_equal(rlock_unlock(g), RLOCK_ELOST);
    assert_int_equal(kind_series(c, "rlock_lost_total", "multi", ""), 1);
    assert_int_equal(kind_series(c, "rlock_holds", "multi", ""), 0);
    assert_int_equal(kind_series(c, "rlock_hold_seconds_count", "multi", ""), 0);
    assert_int_equal(kind_series(c, "rlock_lost_total", "reentrant", ""), 0);
    rlock_free(g);
    rlock_free(m[0]);
    rlock_free(m[1]);
    rlock_client_free(c);
}

/* Per-name figures only for a watched name. */
static void test_watch(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(srv);
    assert_int_equal(rlock_metrics_watch(c, "obs-w\"1"), RLOCK_OK);
    assert_int_equal(rlock_metrics_watch(c, "obs-w\"1"), RLOCK_OK);
    rlock *w = tc_open(c, RLOCK_WRITE, "obs-w\"1");
    rlock *o = tc_open(c, RLOCK_WRITE, "obs-w2");
    tc_lock_unlock(w, 100, 5000);
    tc_lock_unlock(w, 100, 5000);
    tc_lock_unlock(o, 100, 5000);
    assert_int_equal(
        series(c, "rlock_name_acquire_total{name=\"obs-w\\\"1\",kind=\"write\",result=\"ok\"}"), 2);
    assert_int_equal(series(c, "rlock_name_hold_seconds_count{name=\"obs-w\\\"1\",kind=\"write\"}"),
                     2);
    assert_int_equal(acquired(c, "write", "ok"), 3);
    char *text = NULL;
    assert_int_equal(rlock_metrics_text(c, &text), RLOCK_OK);
    assert_null(strstr(text, "obs-w2"));
    assert_null(strstr(text, "kind=\"read\",result=\"ok\"} 0\nrlock_name"));
    rlock_metrics_free(text);
    for (int i = 1; i < 64; i++) {
        char name[32];
        snprintf(name, sizeof(name), "obs-many-%d", i);
        assert_int_equal(rlock_metrics_watch(c, name), RLOCK_OK);
    }
    assert_int_equal(rlock_metrics_watch(c, "obs-one-too-many"), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "64"));
    rlock_free(w);
    rlock_free(o);
    rlock_client_free(c);
}

/* The text of a client that ran every single-key kind and a watched name parses with
 * prometheus_client's OpenMetrics parser, which also checks every family is there. */
static void test_exposition_parses(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(srv);
    assert_int_equal(rlock_metrics_watch(c, "obs-parse"), RLOCK_OK);
    for (int i = 0; i < 5; i++) {
        rlock *l = tc_open(c, kinds[i].kind, i == 0 ? "obs-parse" : kinds[i].label);
        tc_lock_unlock(l, 100, 5000);
        rlock_free(l);
    }
    char *text = NULL;
    assert_int_equal(rlock_metrics_text(c, &text), RLOCK_OK);
    char path[] = "/tmp/rlock-metrics-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    rlock_metrics_free(text);
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s '%s' '%s'", py, parser, path);
    int rc = system(cmd);
    unlink(path);
    assert_int_equal(rc, 0);
    rlock_client_free(c);
}

static void test_bad_input(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(srv);
    char *text = (char *)"x";
    assert_int_equal(rlock_metrics_text(NULL, &text), RLOCK_EINVAL);
    assert_null(text);
    assert_non_null(strstr(rlock_last_error(), "client"));
    assert_int_equal(rlock_metrics_text(c, NULL), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "out"));
    assert_int_equal(rlock_metrics_watch(NULL, "a"), RLOCK_EINVAL);
    assert_int_equal(rlock_metrics_watch(c, NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_metrics_watch(c, ""), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "name"));
    rlock_client_on_event(NULL, record, NULL);
    assert_non_null(strstr(rlock_last_error(), "NULL"));
    rlock_metrics_free(NULL);
    rlock_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    return tc_fixture_open(&srv, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return tc_fixture_close(&srv, NULL);
}

TC_MAIN_PATH(parser, "parse_metrics.py", setup, teardown, cmocka_unit_test(test_bad_input),
             cmocka_unit_test(test_kinds), cmocka_unit_test(test_groups),
             cmocka_unit_test(test_event_order), cmocka_unit_test(test_forced_loss),
             cmocka_unit_test(test_multi_loss), cmocka_unit_test(test_watch),
             cmocka_unit_test(test_exposition_parses))
