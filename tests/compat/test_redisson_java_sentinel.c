/*
 * rlock against the released Redisson (the Java peer of redisson_java.h) under Sentinel (one
 * master, two replicas, three Sentinels): RLock mixed stress of rlock and Redisson threads with a
 * SENTINEL FAILOVER in the middle of it, then wake-ups both ways and the other types' cases
 * (redisson_java_cases.h) on the new master.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redisson_java.h"
#include "redisson_java_cases.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_sentinel.h"
#include "tc_thread.h"

/* Explicit leases on both sides, so a release lost in the switch frees the lock by itself. */
#define LEASE_MS 5000
#define ITERS    50

static tc_deploy g_d;
static rj_peer *g_peer;

/* The peer's "sentinel:<master>:redis://a,redis://b,..." from the deployment's
 * redis-sentinel://a,b,c#<master> (rediss:// over TLS). */
static void peer_where(char *buf, size_t len)
{
    int tls = strncmp(g_d.url, "rediss-", 7) == 0;
    const char *hosts = strstr(g_d.url, "://") + 3;
    const char *hash = strchr(hosts, '#');
    size_t n = (size_t)snprintf(buf, len, "sentinel:%s:", hash + 1);
    const char *at = hosts;
    while (at < hash && n < len) {
        const char *end = memchr(at, ',', (size_t)(hash - at));
        end = end != NULL ? end : hash;
        n += (size_t)snprintf(buf + n, len - n, "%s%s://%.*s", at == hosts ? "" : ",",
                              tls ? "rediss" : "redis", (int)(end - at), at);
        at = end + 1;
    }
}

static int group_setup(void **state)
{
    rj_require(state);
    if (tc_deploy_start(&g_d) != 0) {
        return -1;
    }
    char where[512];
    peer_where(where, sizeof(where));
    g_peer = rj_start_at(where, RJC_WATCHDOG_MS);
    print_message("Redisson %s on %s\n", rj_version(g_peer), where);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rj_stop(g_peer);
    return tc_deploy_stop(&g_d);
}

/* A client on the Sentinels (watchdog_ms when > 0). */
static rlock_client *sentinel_client_wd(int64_t watchdog_ms)
{
    rlock_options o;
    tc_options_url(&o, g_d.url);
    o.command_timeout_ms = 2000;
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    return tc_client(&o);
}

static rlock_client *sentinel_client(void)
{
    return sentinel_client_wd(0);
}

typedef struct fo_thread {
    rlock_client *c;
    rlock *l;
    rj_checker *ck;
    int done, lock_errors, unlock_errors;
} fo_thread;

/* At least ITERS sections, and on until the checker's slot 15 is raised; a lock that fails in the
 * switch is retried, an unlock that fails is left to its lease (the next lock settles it). */
static void *fo_run(void *arg)
{
    fo_thread *t = arg;
    while (t->done < ITERS || atomic_load(&t->ck->slot[15].writers) == 0) {
        int r = rlock_try_lock(t->l, 2000, LEASE_MS);
        if (r != RLOCK_OK) {
            t->lock_errors += r != RLOCK_ETIMEDOUT;
            rh_sleep_ms(20);
            continue;
        }
        rj_ck_enter(t->ck, 0);
        usleep(2000);
        rj_ck_leave(t->ck, 0);
        t->done++;
        r = rlock_unlock(t->l);
        t->unlock_errors += r != RLOCK_OK;
    }
    return NULL;
}

/* 2 rlock threads and 2 Redisson threads take one lock again and again while the Sentinels
 * switch the master, and go on for 500 ms on the new one: the checker sees no two inside, and
 * every section is counted. */
static void test_sentinel_failover_mixed_stress(void **state)
{
    (void)state;
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    rh_server *old = tc_deploy_master(&g_d);
    int ids[2];
    long long entries_java = 0, entries_c = 0;
    for (int i = 0; i < 2; i++) {
        ids[i] = rj_send(g_peer, i == 0 ? "f0" : "f1", "fstress rjs:lock %d 2000 %s %d", ITERS,
                         path, LEASE_MS);
    }
    fo_thread t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (fo_thread){.c = sentinel_client(), .ck = ck};
        t[i].l = tc_open(t[i].c, RLOCK_REENTRANT, "rjs:lock");
        pthread_create(&th[i], NULL, fo_run, &t[i]);
    }
    rh_sleep_ms(300);
    long long before = atomic_load(&ck->slot[0].entries);
    rh_server *now = tc_deploy_failover(&g_d);
    assert_non_null(now);
    assert_ptr_not_equal(now, old);
    long long after = atomic_load(&ck->slot[0].entries);
    rh_sleep_ms(500); /* both sides go on on the new master, then stop */
    atomic_store(&ck->slot[15].writers, 1);
    for (int i = 0; i < 2; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        print_message("Redisson thread %d: %s (sections, lock errors, unlock errors)\n", i, r);
        int sections = 0;
        assert_int_equal(sscanf(r, "ok %d", &sections), 1);
        assert_true(sections >= ITERS);
        entries_java += sections;
        free(r);
        pthread_join(th[i], NULL);
        print_message("rlock thread %d: %d sections, %d lock errors, %d unlock errors\n", i,
                      t[i].done, t[i].lock_errors, t[i].unlock_errors);
        assert_true(t[i].done >= ITERS);
        entries_c += t[i].done;
        rlock_free(t[i].l);
        rlock_client_free(t[i].c);
    }
    long long entries = atomic_load(&ck->slot[0].entries);
    print_message("the failover began after %lld and ended after %lld of %lld sections; %lld "
                  "violations\n",
                  before, after, entries, (long long)atomic_load(&ck->slot[0].violations));
    assert_true(before > 0 && after < entries); /* the switch came in the middle of the run */
    assert_int_equal(atomic_load(&ck->slot[0].violations), 0);
    assert_int_equal(entries, entries_java + entries_c);
    rj_checker_free(ck, path);
}

/* After the switch, Redisson's unlock wakes an rlock waiter and rlock's a Redisson waiter on
 * the new master (60 s leases, 10 s waits). */
static void test_sentinel_wakeups_after_failover(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "rjs:wake");
    rj_expect(g_peer, "w1", "ok", "lock lock rjs:wake 60000");
    tc_holder h;
    tc_holder_start(&h, l, 10000, -1, 0);
    rh_sleep_ms(300);
    char *r = rj_call(g_peer, "w1", "unlock lock rjs:wake");
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_holder_join(&h), RLOCK_OK);
    double to_c = (double)h.got_at - released;
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    int id = rj_send(g_peer, "w2", "try lock rjs:wake 10000 -1");
    rh_sleep_ms(300);
    released = rj_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - released;
    free(r);
    rj_expect(g_peer, "w2", "ok", "unlock lock rjs:wake");
    print_message("after the failover: Redisson unlock -> rlock grant %.1f ms, rlock unlock -> "
                  "Redisson grant %.1f ms\n",
                  to_c, to_java);
    assert_true(to_c < 1000.0 && to_java < 1000.0);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- the other types on the new master (redisson_java_cases.h) --------------------------------
 */

static void test_sentinel_rw_mixed(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rjc_rw_mixed(g_peer, c, "rjs:rw");
    rlock_client_free(c);
}

static void test_sentinel_fenced_tokens(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rjc_fenced(g_peer, c, "rjs:fenced");
    rlock_client_free(c);
}

static void test_sentinel_fair_one_side_queues(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rjc_fair_one_side(g_peer, c, "rjs:fair");
    rlock_client_free(c);
}

static rh_server *current_master(const char *key)
{
    (void)key;
    return tc_deploy_master(&g_d);
}

/* The mixed queue of 20 of test_redisson_java_lock's test_fair_mixed_queue on the new master:
 * every rlock waiter served, exclusion kept, and the same divergence (docs/compatibility.md). */
static void test_sentinel_fair_mixed_queue(void **state)
{
    (void)state;
    rjc_fair_env e = {.p = g_peer, .c = sentinel_client(), .queue_server = current_master};
    rjc_fair_result r = rjc_fair_queue(&e, "rjs:fair:mixed", 'c', "cjcjcjcjcjcjcjcjcjcj", 8000);
    assert_int_equal(r.not_granted_c, 0);
    assert_true(r.inversions > 0 || r.not_granted_j > 0);
    rlock_client_free(e.c);
}

static void test_sentinel_semaphores(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rjc_semaphores(g_peer, c, "rjs:sem", "rjs:lease");
    rjc_semaphore_wakeups(g_peer, c, "rjs:semw");
    rlock_client_free(c);
}

static void test_sentinel_latch(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rjc_latch(g_peer, c, "rjs:latch");
    rlock_client_free(c);
}

static void test_sentinel_force_inspect_watchdogs(void **state)
{
    (void)state;
    rlock_client *c = sentinel_client();
    rlock_client *cw = sentinel_client_wd(RJC_WATCHDOG_MS);
    rjc_force(g_peer, c, "rjs:force");
    rjc_inspect(g_peer, c, "rjs:inspect");
    rjc_watchdogs(g_peer, c, cw, "rjs:wd:java", "rjs:wd:c");
    rlock_client_free(cw);
    rlock_client_free(c);
}

static void test_sentinel_multilock(void **state)
{
    (void)state;
    static const char *const names[3] = {"rjs:m:a", "rjs:m:b", "rjs:m:c"};
    rlock_client *c = sentinel_client();
    rjc_multilock(g_peer, c, names);
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sentinel_failover_mixed_stress),
        cmocka_unit_test(test_sentinel_wakeups_after_failover),
        cmocka_unit_test(test_sentinel_rw_mixed),
        cmocka_unit_test(test_sentinel_fenced_tokens),
        cmocka_unit_test(test_sentinel_fair_one_side_queues),
        cmocka_unit_test(test_sentinel_fair_mixed_queue),
        cmocka_unit_test(test_sentinel_semaphores),
        cmocka_unit_test(test_sentinel_latch),
        cmocka_unit_test(test_sentinel_force_inspect_watchdogs),
        cmocka_unit_test(test_sentinel_multilock),
    };
    /* RJ_TEST=<glob> runs the matching tests only (for a look at one case). */
    if (getenv("RJ_TEST") != NULL) {
        cmocka_set_test_filter(getenv("RJ_TEST"));
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
