/*
 * The minimal ACL rule set for a lock user (docs/acl.md), exactly: every server gets
 * the user below and every lock type runs its basic scenario as that user, with contention (so
 * waiters subscribe and releases publish), watchdog renewals and waiter heartbeats (short
 * timeouts, so they run while the test holds and waits), force unlock and inspect. The user's log
 * must stay free of warnings and no hold may be lost: a rule missing from the set shows up as a
 * failed call, a refused PUBLISH warning or a lost hold. If a type needs more, docs/acl.md's rule
 * set is what must change (and this copy of it), not the scenario.
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

#include "tc_redis.h"
#include "tc_thread.h"

/* The rule set of docs/acl.md for lock names that start with "app:". */
static const char *const acl_rules[] = {
    "ACL", "SETUSER", "locker", "reset", "on", ">locker-pw",
    /* the client's own commands */
    "+ping", "+evalsha", "+script|load", "+subscribe", "+unsubscribe", "+info", "+wait",
    /* what the scripts call */
    "+publish", "+time", "+exists", "+type", "+del", "+get", "+set", "+incr", "+incrby", "+decr",
    "+decrby", "+pexpire", "+pttl", "+hexists", "+hget", "+hgetall", "+hset", "+hdel", "+hincrby",
    "+hlen", "+lindex", "+lrange", "+lpop", "+rpop", "+rpush", "+lrem", "+zadd", "+zrem", "+zscore",
    "+zrange", "+zrangebyscore", "+zremrangebyscore",
    /* keys: the names, and what Redisson derives from them */
    "~app:*", "~{app:*", "~redisson_lock_token:{app:*", "~redisson_lock_queue:{app:*",
    "~redisson_lock_timeout:{app:*", "~rlock_rwlock_writers:{app:*", "~rlock_lock_waiters:{app:*",
    /* channel names passed to scripts as KEYS (as Redisson does), so key patterns too */
    "~redisson_lock__channel:{app:*", "~redisson_rwlock:{app:*", "~rlock_rwlock_writer:{app:*",
    "~redisson_sc:{app:*", "~redisson_countdownlatch__channel__{app:*", "~rlock_lock_wake:{app:*",
    /* channels */
    "&redisson_lock__channel:{app:*", "&redisson_rwlock:{app:*", "&rlock_rwlock_writer:{app:*",
    "&redisson_sc:{app:*", "&redisson_countdownlatch__channel__{app:*", "&rlock_lock_wake:{app:*",
    NULL};

#define N_SERVERS 3

/* Asserts that call returned want, showing rlock's detail (the NOPERM text) when it did not. */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_ != (want)) {                                                                       \
            fail_msg("%s -> %d: %s", #call, rc_, rlock_last_error());                              \
        }                                                                                          \
    } while (0)

static rh_server *g_srv[N_SERVERS];
static rlock_client *g_a, *g_b;  /* two clients of the user on server 0 */
static atomic_int g_warnings;    /* log lines at WARN or worse, every client */
static atomic_int g_lost;        /* on_lost calls, every client */
static char g_last_warning[512]; /* the text of the last such line (read after the calls) */

static void count_log(int level, const char *msg, void *user_data)
{
    (void)user_data;
    if (level <= RLOCK_LOG_WARN) {
        atomic_fetch_add(&g_warnings, 1);
        snprintf(g_last_warning, sizeof(g_last_warning), "%s", msg);
        fprintf(stderr, "rlock log %d: %s\n", level, msg);
    }
}

static void count_lost(const char *name, void *user_data)
{
    (void)user_data;
    atomic_fetch_add(&g_lost, 1);
    fprintf(stderr, "lost %s\n", name);
}

/* A client of the user "locker" on server i; short watchdog and waiter timeouts, so that renewals
 * and heartbeats run during the scenarios. */
static rlock_client *locker_client(int i)
{
    rlock_options o;
    tc_options(&o, g_srv[i]);
    o.watchdog_timeout_ms = 900;
    o.waiter_timeout_ms = 900;
    o.log_fn = count_log;
    o.on_lost = count_lost;
    return tc_client_as(&o, g_srv[i], "locker", "locker-pw");
}

/* The calls a thread of another client waits in (tc_bg; up to 10 s, woken by a message). */
static int lock_wait(void *obj)
{
    int r = rlock_try_lock(obj, 10000, -1);
    return r == RLOCK_OK ? rlock_unlock(obj) : r;
}

static int sem_acquire_wait(void *obj)
{
    int r = rlock_semaphore_acquire(obj, 1, 10000);
    return r == RLOCK_OK ? rlock_semaphore_release(obj, 1) : r;
}

static int latch_wait(void *obj)
{
    return rlock_latch_await(obj, 10000);
}

static int sem_release_one(void *obj)
{
    return rlock_semaphore_release(obj, 1);
}

static int latch_count_down_last(void *obj)
{
    EXPECT(rlock_latch_count(obj), 1);
    return rlock_latch_count_down(obj);
}

/* The other client's waiter (wait(waiter_obj) on a thread) blocks until wake(waker_obj), called
 * 300 ms later, lets it through: a subscription on one side, a publish on the other. */
static void waiter_woken(int (*wait)(void *), void *waiter_obj, int (*wake)(void *),
                         void *waker_obj)
{
    tc_bg w;
    tc_bg_start(&w, wait, waiter_obj);
    rh_sleep_ms(300);
    EXPECT(wake(waker_obj), RLOCK_OK);
    EXPECT(tc_bg_join(&w), RLOCK_OK);
}

/* holder takes the lock, waiter (another client) waits for it through 700 ms of renewals and
 * heartbeats, then gets it when holder releases (woken by the release's message). */
static void contend(rlock *holder, rlock *other)
{
    tc_bg w;
    EXPECT(rlock_lock(holder, -1), RLOCK_OK);
    tc_bg_start(&w, lock_wait, other);
    rh_sleep_ms(700);
    EXPECT(rlock_is_held(holder), 1);
    EXPECT(rlock_unlock(holder), RLOCK_OK);
    EXPECT(tc_bg_join(&w), RLOCK_OK);
}

/* The basic calls on a single-key lock: re-entry, queries, token, inspect, force unlock. */
static void basics(rlock_client *c, rlock *l, const char *name)
{
    rlock_lock_info *info = NULL;
    EXPECT(rlock_lock(l, 5000), RLOCK_OK);
    EXPECT(rlock_try_lock(l, 0, -1), RLOCK_OK);
    EXPECT(rlock_hold_count(l), 2);
    EXPECT(rlock_is_locked(l), 1);
    assert_true(rlock_remaining_ttl_ms(l) > 0);
    EXPECT(rlock_inspect(c, name, &info), RLOCK_OK);
    assert_int_equal(info->locked, 1);
    rlock_lock_info_free(info);
    EXPECT(rlock_unlock(l), RLOCK_OK);
    EXPECT(rlock_unlock(l), RLOCK_OK);
    EXPECT(rlock_lock(l, 5000), RLOCK_OK);
    EXPECT(rlock_force_unlock(l), 1);
    EXPECT(rlock_unlock(l), RLOCK_ELOST);
}

static void single_kind(rlock_kind kind, rlock_kind rival, const char *name)
{
    rlock *la = tc_open(g_a, kind, name);
    rlock *lb = tc_open(g_b, rival, name);
    basics(g_a, la, name);
    contend(la, lb);
    contend(lb, la);
    rlock_free(lb);
    rlock_free(la);
}

static void test_reentrant(void **state)
{
    (void)state;
    single_kind(RLOCK_REENTRANT, RLOCK_REENTRANT, "app:reentrant");
}

static void test_fair(void **state)
{
    (void)state;
    single_kind(RLOCK_FAIR, RLOCK_FAIR, "app:fair");
}

/* Write against write, then read against write both ways (waiting writers, their channels). */
static void test_rw(void **state)
{
    (void)state;
    single_kind(RLOCK_WRITE, RLOCK_WRITE, "app:rw");
    single_kind(RLOCK_READ, RLOCK_WRITE, "app:rw");
}

static void test_multi(void **state)
{
    (void)state;
    rlock *ma[2] = {rlock_open(g_a, RLOCK_REENTRANT, "app:m1"),
                    rlock_open(g_a, RLOCK_FAIR, "app:m2")};
    rlock *mb[2] = {rlock_open(g_b, RLOCK_REENTRANT, "app:m1"),
                    rlock_open(g_b, RLOCK_FAIR, "app:m2")};
    rlock *ga = rlock_multi_new(ma, 2);
    rlock *gb = rlock_multi_new(mb, 2);
    assert_non_null(ga);
    assert_non_null(gb);
    contend(ga, gb);
    rlock_free(gb);
    rlock_free(ga);
    for (int i = 0; i < 2; i++) {
        rlock_free(ma[i]);
        rlock_free(mb[i]);
    }
}

static void test_redlock(void **state)
{
    (void)state;
    rlock_client *c[N_SERVERS];
    rlock *m[N_SERVERS];
    for (int i = 0; i < N_SERVERS; i++) {
        c[i] = locker_client(i);
        m[i] = tc_open(c[i], RLOCK_REENTRANT, "app:redlock");
    }
    rlock *g = rlock_redlock_new(m, N_SERVERS);
    assert_non_null(g);
    EXPECT(rlock_lock(g, -1), RLOCK_OK);
    rh_sleep_ms(700); /* renewals on every server */
    EXPECT(rlock_is_held(g), 1);
    EXPECT(rlock_is_locked(g), 1);
    assert_true(rlock_token(g) > 0);
    EXPECT(rlock_unlock(g), RLOCK_OK);
    EXPECT(rlock_try_lock(g, 0, 5000), RLOCK_OK);
    EXPECT(rlock_unlock(g), RLOCK_OK);
    rlock_free(g);
    for (int i = 0; i < N_SERVERS; i++) {
        rlock_free(m[i]);
        rlock_client_free(c[i]);
    }
}

static void test_semaphore(void **state)
{
    (void)state;
    char id[RLOCK_PERMIT_ID_LEN + 1];
    rlock_semaphore *sa = rlock_semaphore_open(g_a, "app:sem");
    rlock_semaphore *sb = rlock_semaphore_open(g_b, "app:sem");
    assert_non_null(sa);
    assert_non_null(sb);
    EXPECT(rlock_semaphore_try_set_permits(sa, 1), 1);
    EXPECT(rlock_semaphore_acquire(sa, 1, 0), RLOCK_OK);
    waiter_woken(sem_acquire_wait, sb, sem_release_one, sa);
    EXPECT(rlock_semaphore_acquire_leased(sa, 0, -1, id), RLOCK_OK);
    rh_sleep_ms(700); /* renewals of the leased permit */
    EXPECT(rlock_semaphore_available(sa), 0);
    EXPECT(rlock_semaphore_release_leased(sa, id), RLOCK_OK);
    EXPECT(rlock_semaphore_add_permits(sa, 1), RLOCK_OK);
    EXPECT(rlock_semaphore_available(sa), 2);
    /* Drain, set permits, lease updates, totals and release-if-exists. */
    EXPECT(rlock_semaphore_acquire_leased(sa, 0, 60000, id), RLOCK_OK);
    EXPECT(rlock_semaphore_update_lease(sa, id, 30000), RLOCK_OK);
    EXPECT(rlock_semaphore_set_permits(sa, 3), RLOCK_OK);
    EXPECT(rlock_semaphore_permits(sa), 3);
    EXPECT(rlock_semaphore_acquired(sa), 1);
    EXPECT(rlock_semaphore_drain(sa), 2);
    EXPECT(rlock_semaphore_release_if_exists(sa, 2), 1);
    EXPECT(rlock_semaphore_release_leased(sa, id), RLOCK_OK);
    rlock_semaphore_free(sb);
    rlock_semaphore_free(sa);
}

static void test_latch(void **state)
{
    (void)state;
    rlock_latch *la = rlock_latch_open(g_a, "app:latch");
    rlock_latch *lb = rlock_latch_open(g_b, "app:latch");
    assert_non_null(la);
    assert_non_null(lb);
    EXPECT(rlock_latch_try_set_count(la, 1), 1);
    waiter_woken(latch_wait, lb, latch_count_down_last, la);
    EXPECT(rlock_latch_try_set_count(la, 2), 1);
    EXPECT(rlock_latch_delete(la), 1);
    rlock_latch_free(lb);
    rlock_latch_free(la);
}

/* Runs after every scenario: nothing was refused behind the API's back. */
static void test_no_warnings(void **state)
{
    (void)state;
    assert_int_equal(atomic_load(&g_warnings), 0);
    assert_int_equal(atomic_load(&g_lost), 0);
}

/* A user without INFO (the replica count) still gets locks, without replica sync, and the client
 * says so once at WARN. Runs last: it takes INFO from the user on server 1. */
static void test_without_info(void **state)
{
    (void)state;
    const char *deny[] = {"ACL", "SETUSER", "locker", "-info", NULL};
    char *r = rh_cmd_str(g_srv[1], deny);
    assert_non_null(r);
    free(r);
    atomic_store(&g_warnings, 0);
    rlock_client *c = locker_client(1);
    assert_non_null(c);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "app:no-info");
    for (int i = 0; i < 3; i++) {
        EXPECT(rlock_lock(l, -1), RLOCK_OK);
        EXPECT(rlock_unlock(l), RLOCK_OK);
    }
    assert_int_equal(atomic_load(&g_warnings), 1);
    assert_non_null(strstr(g_last_warning, "not replica-synced"));
    rlock_free(l);
    rlock_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    for (int i = 0; i < N_SERVERS; i++) {
        g_srv[i] = rh_start(NULL);
        if (g_srv[i] == NULL) {
            return -1;
        }
        char *r = rh_cmd_str(g_srv[i], acl_rules);
        if (r == NULL) {
            fprintf(stderr, "ACL SETUSER refused\n");
            return -1;
        }
        free(r);
    }
    g_a = locker_client(0);
    g_b = locker_client(0);
    return g_a != NULL && g_b != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rlock_client_free(g_b);
    rlock_client_free(g_a);
    for (int i = 0; i < N_SERVERS; i++) {
        rh_free(g_srv[i]);
    }
    return 0;
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_reentrant), cmocka_unit_test(test_fair),
        cmocka_unit_test(test_rw), cmocka_unit_test(test_multi), cmocka_unit_test(test_redlock),
        cmocka_unit_test(test_semaphore), cmocka_unit_test(test_latch),
        cmocka_unit_test(test_no_warnings), cmocka_unit_test(test_without_info))
