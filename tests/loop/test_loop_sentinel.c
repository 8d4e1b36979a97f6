/*
 * A loop client on a Sentinel deployment (redis-server x3 + Sentinel x3, tc_sentinel.h) through
 * an adapter (tl_loop.h): it finds the master and locks; across one SENTINEL FAILOVER, run on a
 * helper thread while the loop runs, a loop waiter is resubscribed on the new master and
 * acquires when a threaded holder unlocks there, a loop hold keeps being renewed there, the
 * failover is counted (rlock_failovers_total, RLOCK_EV_FAILOVER naming the new master), and
 * every done runs exactly once. A master name no Sentinel knows fails the first lock with
 * RLOCK_ECONN, and so does a replica's READONLY. test_loop_sentinel_uv_tls runs it over TLS
 * everywhere (label long).
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
#include "tc_replicas.h"
#include "tc_sentinel.h"
#include "tc_thread.h"
#include "tl_common.h"
#include "tl_loop.h"

/* The watchdog lease of the loop client's holds, renewed every third of it: long enough for a
 * hold to outlive the failover's window (the renewals the old master takes after the promotion
 * are not replicated), short enough to see renewals on the new master soon. */
#define WATCHDOG_MS 12000

static tc_deploy g_d;

TC_DEPLOY_FIXTURE(g_d)

static rlock_client *loop_client(tu_loop *l, const char *url)
{
    /* The TLS twin really is TLS everywhere (tc_options_url then trusts the test CA). */
    assert_int_equal(strncmp(url, "rediss-", 7) == 0, rh_tls_dir() != NULL);
    rlock_options o;
    tc_options_url(&o, url);
    o.connect_timeout_ms = 3000;
    o.watchdog_timeout_ms = WATCHDOG_MS;
    return tl_client(l, &o);
}

static int failover_call(void *arg)
{
    rh_server **now = arg;
    *now = tc_deploy_failover(&g_d);
    return *now != NULL ? 0 : -1;
}

/* Runs the loop while tc_deploy_failover() runs on a helper thread (the loop's holds must keep
 * being renewed meanwhile): the new master. */
static rh_server *failover_on_loop(tu_loop *l)
{
    rh_server *now = NULL;
    tc_bg bg;
    tc_bg_start(&bg, failover_call, &now);
    while (atomic_load(&bg.result) == TC_BG_RUNNING) {
        tl_run_for(l, 50);
    }
    assert_int_equal(tc_bg_join(&bg), 0);
    return now;
}

/* Runs the loop until channel has a listener on s (a reentrant waiter's pattern): 1, or 0
 * after ms. */
static int loop_until_numsub(tu_loop *l, rh_server *s, const char *channel, int64_t ms)
{
    for (int64_t waited = 0; waited < ms; waited += 50) {
        if (tc_listeners(s, channel) >= 1) {
            return 1;
        }
        tl_run_for(l, 50);
    }
    return tc_listeners(s, channel) >= 1;
}

static long long pttl(rh_server *s, const char *key)
{
    const char *argv[] = {"PTTL", key, NULL};
    return rh_cmd_int(s, argv);
}

/* Runs the loop until the PTTL of both keys on s rose once (a renewal there: without one it
 * only falls), each key alive at every look: 1, or 0 after ms. */
static int renewed_on(tu_loop *l, rh_server *s, const char *k1, const char *k2, int64_t ms)
{
    long long p1 = pttl(s, k1), p2 = pttl(s, k2);
    int up1 = 0, up2 = 0;
    for (int64_t waited = 0; waited < ms && !(up1 && up2); waited += 100) {
        tl_run_for(l, 100);
        long long n1 = pttl(s, k1), n2 = pttl(s, k2);
        if (n1 <= 0 || n2 <= 0) {
            print_message("PTTL on port %d: %s %lld, %s %lld\n", rh_port(s), k1, n1, k2, n2);
            return 0;
        }
        up1 |= n1 > p1;
        up2 |= n2 > p2;
        p1 = n1;
        p2 = n2;
    }
    return up1 && up2;
}

/* The scenario of the file's head, on one deployment and one failover. */
static void test_failover_under_loop(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client(l, g_d.url);
    tc_failovers f = {.n = 0};
    rlock_client_on_event(c, tc_failover_hook, &f);
    rlock *hold = tc_open(c, RLOCK_REENTRANT, "ls:hold");
    rlock *wait = tc_open(c, RLOCK_REENTRANT, "ls:wait");
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    /* The master is found and a lock taken there. */
    rh_server *old = tc_deploy_master(&g_d);
    assert_non_null(old);
    tl_done dh = {0};
    assert_int_equal(tl_lock_async(hold, a, 0, -1, NULL, &dh), RLOCK_OK);
    assert_true(tu_run_until(l, &dh.calls, 1, 5000));
    assert_int_equal(dh.rc, RLOCK_OK);
    assert_true(pttl(old, "ls:hold") > 0);
    /* A threaded holder with a long lease, and a loop waiter subscribed on the old master (its
     * timer, min(TTL, deadline), does not ring before the end). */
    rlock_options to;
    tc_options_url(&to, g_d.url);
    to.connect_timeout_ms = 3000;
    rlock_client *tc = tc_client(&to);
    rlock *th = tc_open(tc, RLOCK_REENTRANT, "ls:wait");
    assert_int_equal(rlock_try_lock(th, 0, 120000), RLOCK_OK);
    tl_done dw = {0};
    assert_int_equal(tl_lock_async(wait, b, 120000, -1, NULL, &dw), RLOCK_OK);
    const char *channel = "redisson_lock__channel:{ls:wait}";
    assert_true(loop_until_numsub(l, old, channel, 5000));
    assert_int_equal(tc_replicas_wait(old, 2, 5000), 0);
    rh_server *now = failover_on_loop(l);
    assert_non_null(now);
    assert_true(now != old);
    /* The margin left: renewals the old master took after the promotion were not replicated. */
    print_message("failover done; ls:hold's PTTL on the new master: %lld ms of %d\n",
                  pttl(now, "ls:hold"), WATCHDOG_MS);
    /* The waiter is resubscribed on the new master and still waits; the holder unlocks there. */
    if (!loop_until_numsub(l, now, channel, 10000)) {
        fail_msg("the loop waiter's channel is not subscribed on the new master (port %d)",
                 rh_port(now));
    }
    assert_int_equal(dw.calls, 0);
    assert_int_equal(rlock_unlock(th), RLOCK_OK);
    assert_true(tu_run_until(l, &dw.calls, 1, 10000));
    assert_int_equal(dw.rc, RLOCK_OK);
    /* The hold taken before the failover and the one taken after it are renewed there. */
    assert_true(renewed_on(l, now, "ls:hold", "ls:wait", WATCHDOG_MS / 3 + 2000));
    /* Counted once per switch, one event per count, the last naming the new master. */
    long long n = tc_metric(c, "rlock_failovers_total", NULL, NULL);
    assert_true(n >= 1);
    assert_int_equal(atomic_load(&f.n), n);
    rh_server *cur = tc_deploy_master(&g_d);
    assert_true(tc_failover_port_is(&f, rh_tls_port(cur) ? rh_tls_port(cur) : rh_port(cur)));
    /* Both holds are given back on the new master; every done ran once. */
    tl_done ua = {0}, ub = {0};
    assert_int_equal(rlock_unlock_async(hold, a, tl_lock_done, &ua), RLOCK_OK);
    assert_int_equal(rlock_unlock_async(wait, b, tl_lock_done, &ub), RLOCK_OK);
    assert_true(tu_run_until(l, &ub.calls, 1, 5000));
    assert_true(tu_run_until(l, &ua.calls, 1, 5000));
    tl_run_for(l, 100);
    assert_int_equal(ua.rc, RLOCK_OK);
    assert_int_equal(ub.rc, RLOCK_OK);
    assert_int_equal(dh.calls + dw.calls + ua.calls + ub.calls, 4);
    assert_int_equal(pttl(cur, "ls:hold"), -2);
    rlock_free(th);
    rlock_client_free(tc);
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_free(hold);
    rlock_free(wait);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A master no Sentinel knows: the first lock's done gets RLOCK_ECONN, once. */
static void test_unknown_master(void **state)
{
    (void)state;
    char url[300];
    snprintf(url, sizeof(url), "%s", g_d.url);
    char *hash = strrchr(url, '#');
    assert_non_null(hash);
    snprintf(hash, sizeof(url) - (size_t)(hash - url), "#nosuchmaster");
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client(l, url);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "ls:none");
    rlock_owner *a = tl_owner(c);
    tl_done d = {0};
    int rc = tl_lock_async(lk, a, 0, -1, NULL, &d);
    if (rc == RLOCK_OK) {
        assert_true(tu_run_until(l, &d.calls, 1, 5000));
        tl_run_for(l, 50);
        assert_int_equal(d.calls, 1);
        rc = d.rc;
    }
    assert_int_equal(rc, RLOCK_ECONN);
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A replica answers the attempt READONLY: the operation completes with RLOCK_ECONN (the master
 * is changing, as a threaded client reports it), once. */
static void test_replica_answers_readonly(void **state)
{
    (void)state;
    rh_server *m = tc_deploy_master(&g_d);
    rh_server *replica = g_d.data[0] != m ? g_d.data[0] : g_d.data[1];
    tu_loop *l = tu_loop_new();
    rlock_options o;
    tc_options(&o, replica);
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "ls:readonly");
    rlock_owner *a = tl_owner(c);
    tl_done d;
    assert_int_equal(tl_lock_once(l, lk, a, 50, &d), RLOCK_ECONN);
    assert_int_equal(d.calls, 1); /* started, and ended by its done */
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_master),
        cmocka_unit_test(test_replica_answers_readonly),
        cmocka_unit_test(test_failover_under_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
