/*
 * +switch-master (issue 13): redis-server x3 + Sentinel x3. A client subscribed to a Sentinel's
 * +switch-master moves to the new master when the Sentinels announce it, before it issues any
 * command: its connections show up in CLIENT LIST of the new master while it is idle, its next
 * lock succeeds there at the first try (the old master, a replica by then, never answered it
 * READONLY), the channels of its current waiters are subscribed on the new master before anyone
 * publishes there, and a waiter then acquires. When its Sentinel goes down, the client subscribes
 * on the next one and still follows a failover. Registered a second time over TLS everywhere
 * (test_sentinel_switch_tls: rediss-sentinel://, TLS Sentinels and data nodes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_metric.h"
#include "tc_redis.h"
#include "tc_sentinel.h"
#include "tc_thread.h"

static tc_deploy g_d;

TC_DEPLOY_FIXTURE(g_d)

static rlock_client *sentinel_client(void)
{
    /* The TLS variant really is TLS everywhere (tc_options_url then trusts the test CA). */
    assert_int_equal(strncmp(g_d.url, "rediss-", 7) == 0, rh_tls_dir() != NULL);
    rlock_options o;
    tc_options_url(&o, g_d.url);
    o.connect_timeout_ms = 3000;
    return tc_client(&o);
}

/* The CLIENT LIST lines of s that have every one of the words in `has` (NULL-terminated) and
 * none of those in `not`. */
static int count_clients(rh_server *s, const char *const *has, const char *const * not )
{
    const char *argv[] = {"CLIENT", "LIST", NULL};
    char *list = rh_cmd_str(s, argv);
    int n = 0;
    for (char *line = list != NULL ? strtok(list, "\n") : NULL; line != NULL;
         line = strtok(NULL, "\n")) {
        int ok = 1;
        for (int i = 0; has != NULL && has[i] != NULL; i++) {
            ok &= strstr(line, has[i]) != NULL;
        }
        for (int i = 0; not != NULL && not [i] != NULL; i++) {
            ok &= strstr(line, not [i]) == NULL;
        }
        n += ok;
    }
    free(list);
    return n;
}

/* Connections of rlock clients on a data server: neither a Sentinel's (named sentinel-...) nor
 * a replication link (flags S or M) nor the harness' own (running CLIENT LIST). */
static int data_clients(rh_server *s)
{
    const char * not [] = {"name=sentinel-", "flags=S", "flags=M", "cmd=client|list", NULL};
    return count_clients(s, NULL, not );
}

/* Subscribers on a Sentinel (flags P): only rlock clients subscribe there in this test. */
static int sentinel_subscribers(rh_server *s)
{
    const char *has[] = {"flags=P", NULL};
    return count_clients(s, has, NULL);
}

static int wait_count(int (*count)(rh_server *), rh_server *s, int want, int64_t ms)
{
    int64_t deadline = rh_now_ms() + ms;
    while (count(s) < want) {
        if (rh_now_ms() >= deadline) {
            return 0;
        }
        rh_sleep_ms(20);
    }
    return 1;
}

/* How many commands s answered READONLY (INFO errorstats). */
static long long readonly_errors(rh_server *s)
{
    const char *argv[] = {"INFO", "errorstats", NULL};
    char *info = rh_cmd_str(s, argv);
    const char *p = info != NULL ? strstr(info, "errorstat_READONLY:count=") : NULL;
    long long n = p != NULL ? atoll(p + strlen("errorstat_READONLY:count=")) : 0;
    free(info);
    return n;
}

/* An idle client follows a failover: connections on the new master before it issues anything,
 * then one lock there at the first try. */
static void check_idle_client_moves(rlock_client *c, const char *name)
{
    rh_server *old = tc_deploy_master(&g_d);
    assert_non_null(old);
    rh_server *now = tc_deploy_failover(&g_d);
    assert_non_null(now);
    if (!wait_count(data_clients, now, 1, 5000)) {
        fail_msg("the idle client has no connection on the new master (port %d)", rh_port(now));
    }
    long long readonly_before = readonly_errors(old);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, name);
    assert_non_null(l);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    const char *argv[] = {"EXISTS", name, NULL};
    assert_int_equal(rh_cmd_int(now, argv), 1);
    assert_int_equal(readonly_errors(old), readonly_before);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

static void test_idle_client_follows_switch(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    tc_failovers f = {.n = 0};
    rlock_client_on_event(c, tc_failover_hook, &f);
    assert_int_equal(tc_metric(c, "rlock_failovers_total", NULL, NULL), 0);
    check_idle_client_moves(c, "sw:idle");
    /* One master switch was asked for: counted, one event per count, and the last event names
     * the new master's address. At least once, not exactly: on a busy box the Sentinels can
     * promote a second replica after the first (test_sentinel_kill has seen it), and the client
     * then rightly counts both switches. */
    long long n = tc_metric(c, "rlock_failovers_total", NULL, NULL);
    assert_true(n >= 1);
    assert_int_equal(atomic_load(&f.n), n);
    rh_server *now = tc_deploy_master(&g_d);
    assert_true(tc_failover_port_is(&f, rh_tls_port(now) ? rh_tls_port(now) : rh_port(now)));
    rlock_client_free(c);
}

typedef struct waiter_call {
    rlock *l;
} waiter_call;

/* On its own thread: waits for the lock, then gives it back on the same thread. */
static int waiter_lock(void *arg)
{
    waiter_call *w = arg;
    int r = rlock_lock(w->l, -1);
    if (r == RLOCK_OK) {
        r = rlock_unlock(w->l);
    }
    return r;
}

/* A waiter blocked in rlock_lock across a failover: its channel is subscribed on the new master
 * before the holder releases there, and it then acquires. */
static void test_waiter_resubscribed(void **state)
{
    (void)state;
    rlock_client *holder = sentinel_client();
    rlock_client *waiter = sentinel_client();
    /* A reentrant waiter listens on its client's own wake channel (and on Redisson's channel
     * through a pattern, which NUMSUB does not count). */
    char channel[128];
    snprintf(channel, sizeof(channel), "rlock_lock_wake:{sw:wait}:%s", rlock_client_id(waiter));
    rlock *lh = rlock_open(holder, RLOCK_REENTRANT, "sw:wait");
    waiter_call w = {rlock_open(waiter, RLOCK_REENTRANT, "sw:wait")};
    assert_int_equal(rlock_lock(lh, -1), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, waiter_lock, &w);
    assert_true(tc_wait_numsub(tc_deploy_master(&g_d), channel, 1, 5000));
    rh_server *now = tc_deploy_failover(&g_d);
    assert_non_null(now);
    if (!tc_wait_numsub(now, channel, 1, 5000)) {
        fail_msg("the waiter's channel is not subscribed on the new master (port %d)",
                 rh_port(now));
    }
    assert_int_equal(atomic_load(&bg.result), TC_BG_RUNNING);
    assert_int_equal(rlock_unlock(lh), RLOCK_OK);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    rlock_free(w.l);
    rlock_free(lh);
    rlock_client_free(waiter);
    rlock_client_free(holder);
}

/* The Sentinel the client subscribed on goes down: it subscribes on the next one, and a
 * failover announced there still moves it. */
static void test_next_sentinel_after_drop(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    assert_true(wait_count(sentinel_subscribers, g_d.sentinel[0], 1, 5000));
    assert_int_equal(rh_stop(g_d.sentinel[0]), 0);
    if (!wait_count(sentinel_subscribers, g_d.sentinel[1], 1, 5000)) {
        fail_msg("no subscription on the next Sentinel after the first went down");
    }
    check_idle_client_moves(c, "sw:next");
    rlock_client_free(c);
    assert_int_equal(rh_restart(g_d.sentinel[0]), 0);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_idle_client_follows_switch),
        cmocka_unit_test(test_waiter_resubscribed), cmocka_unit_test(test_next_sentinel_after_drop))
