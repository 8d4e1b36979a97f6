/*
 * rlock against the released Redisson (the Java peer of redisson_java.h) on a Redis 7 cluster of
 * 3 masters, both in their default pub/sub mode (Redisson's AUTO, rlock's AUTO): RLock mixed
 * stress, RLock wake-ups both ways on every master, semaphore and latch wake-ups both ways, the
 * other types' cases (redisson_java_cases.h), the mixed fair queue of 20, then a CLUSTER FAILOVER
 * in a mixed RLock stress. Leases are 60 s and waits 10 s, so a wait that ends early was ended by
 * the release's message.
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
#include "redis_cluster.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* Every wake-up within MESSAGE_MS (far below the 10 s waits); the lock's median within WAKE_MS. */
#define WAKE_MS    50.0
#define MESSAGE_MS 1000.0
/* How long a waiter is given to subscribe before the release (no NUMSUB for sharded channels). */
#define SUBSCRIBE_MS 300

static rj_peer *g_peer;
static rlock_client *g_c;

static int group_setup(void **state)
{
    rj_require(state);
    if (tc_cluster_setup(state) != 0) {
        return -1;
    }
    char where[1024] = "cluster:";
    for (int i = 0; i < rc_node_count(tc_cl); i++) {
        size_t n = strlen(where);
        snprintf(where + n, sizeof(where) - n, "%s%s", i > 0 ? "," : "", rh_url(rc_node(tc_cl, i)));
    }
    g_peer = rj_start_at(where, RJC_WATCHDOG_MS);
    g_c = tc_cluster_client(0);
    print_message("Redisson %s on the cluster %s\n", rj_version(g_peer), where);
    return 0;
}

static int group_teardown(void **state)
{
    rlock_client_free(g_c);
    rj_stop(g_peer);
    return tc_cluster_teardown(state);
}

/* One round on name: Redisson's unlock wakes an rlock waiter, then rlock's unlock a Redisson
 * waiter; the two wake-ups in ms. */
static void lock_round(const char *name, double *to_c, double *to_java)
{
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, name);
    rj_expect(g_peer, "w1", "ok", "lock lock %s 60000", name);
    tc_holder h;
    tc_holder_start(&h, l, 10000, -1, 0);
    rh_sleep_ms(SUBSCRIBE_MS);
    char *r = rj_call(g_peer, "w1", "unlock lock %s", name);
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_holder_join(&h), RLOCK_OK);
    *to_c = (double)h.got_at - released;
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    int id = rj_send(g_peer, "w2", "try lock %s 10000 -1", name);
    rh_sleep_ms(SUBSCRIBE_MS);
    double c_released = rj_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    *to_java = rj_reply_ms(r) - c_released;
    free(r);
    rj_expect(g_peer, "w2", "ok", "unlock lock %s", name);
    rlock_free(l);
}

/* Wake-ups both ways on a name of each master, after a warm-up round. */
static void test_cluster_lock_wakeups(void **state)
{
    (void)state;
    double to_c[6], to_java[6];
    char name[64];
    tc_cluster_name_on(0, "rjc:warm", name, sizeof(name));
    lock_round(name, &to_c[0], &to_java[0]);
    for (int i = 0; i < 6; i++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "rjc:wake%d:", i);
        tc_cluster_name_on(i % 3, prefix, name, sizeof(name));
        lock_round(name, &to_c[i], &to_java[i]);
        print_message("%s (master %d): Redisson unlock -> rlock grant %.1f ms, rlock unlock -> "
                      "Redisson grant %.1f ms\n",
                      name, i % 3, to_c[i], to_java[i]);
        assert_true(to_c[i] < MESSAGE_MS && to_java[i] < MESSAGE_MS);
    }
    int fast = 0;
    for (int i = 0; i < 6; i++) {
        fast += to_c[i] < WAKE_MS && to_java[i] < WAKE_MS;
    }
    assert_true(fast >= 4);
}

typedef struct stress_thread {
    rlock *l;
    rj_checker *ck;
    int failures;
} stress_thread;

static void *stress_run(void *arg)
{
    stress_thread *t = arg;
    for (int i = 0; i < 100; i++) {
        if (rlock_lock(t->l, 30000) != RLOCK_OK) {
            t->failures++;
            continue;
        }
        rj_ck_enter(t->ck, 0);
        usleep(200);
        rj_ck_leave(t->ck, 0);
        t->failures += rlock_unlock(t->l) != RLOCK_OK;
    }
    return NULL;
}

/* 3 rlock threads (clients of their own) and 3 Redisson threads, 100 sections each on one name:
 * the independent checker sees no two inside. */
static void test_cluster_lock_mixed_stress(void **state)
{
    (void)state;
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    int ids[3];
    for (int i = 0; i < 3; i++) {
        char worker[8];
        snprintf(worker, sizeof(worker), "s%d", i);
        ids[i] = rj_send(g_peer, worker, "stress lock rjc:stress 100 200 %s 0", path);
    }
    rlock_client *cs[3];
    stress_thread t[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        cs[i] = tc_cluster_client(0);
        t[i] = (stress_thread){.l = tc_open(cs[i], RLOCK_REENTRANT, "rjc:stress"), .ck = ck};
        pthread_create(&th[i], NULL, stress_run, &t[i]);
    }
    for (int i = 0; i < 3; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        assert_string_equal(r, "ok 100");
        free(r);
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failures, 0);
        rlock_free(t[i].l);
        rlock_client_free(cs[i]);
    }
    print_message("cluster stress: %lld sections, %lld violations\n",
                  (long long)atomic_load(&ck->slot[0].entries),
                  (long long)atomic_load(&ck->slot[0].violations));
    assert_int_equal(atomic_load(&ck->slot[0].violations), 0);
    assert_int_equal(atomic_load(&ck->slot[0].entries), 600);
    rj_checker_free(ck, path);
}

static int sem_acquire(void *arg)
{
    return rlock_semaphore_acquire(arg, 1, 10000);
}

static int latch_await(void *arg)
{
    return rlock_latch_await(arg, 10000);
}

/* A semaphore's releases and a latch's count-downs wake the other side's waiters. */
static void test_cluster_semaphore_latch_wakeups(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjc:sem");
    rj_expect(g_peer, "w", "true", "sset rjc:sem 1");
    rj_expect(g_peer, "w", "1", "sacq rjc:sem 1 0");
    tc_bg b;
    tc_bg_start(&b, sem_acquire, s);
    rh_sleep_ms(SUBSCRIBE_MS);
    char *r = rj_call(g_peer, "w", "srel rjc:sem 1");
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    double sem_to_c = (double)b.done_at - released;
    int id = rj_send(g_peer, "w", "sacq rjc:sem 1 10000");
    rh_sleep_ms(SUBSCRIBE_MS);
    released = rj_now_ms();
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double sem_to_java = rj_reply_ms(r) - released;
    free(r);
    rlock_semaphore_free(s);
    rlock_latch *l = rlock_latch_open(g_c, "rjc:latch");
    rj_expect(g_peer, "w", "true", "lset rjc:latch 1");
    tc_bg_start(&b, latch_await, l);
    rh_sleep_ms(SUBSCRIBE_MS);
    r = rj_call(g_peer, "w", "ldown rjc:latch");
    released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    double latch_to_c = (double)b.done_at - released;
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    id = rj_send(g_peer, "w", "lawait rjc:latch 10000");
    rh_sleep_ms(SUBSCRIBE_MS);
    released = rj_now_ms();
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double latch_to_java = rj_reply_ms(r) - released;
    free(r);
    rlock_latch_free(l);
    print_message("semaphore: to rlock %.1f ms, to Redisson %.1f ms; latch: to rlock %.1f ms, to "
                  "Redisson %.1f ms\n",
                  sem_to_c, sem_to_java, latch_to_c, latch_to_java);
    assert_true(sem_to_c < MESSAGE_MS && sem_to_java < MESSAGE_MS);
    assert_true(latch_to_c < MESSAGE_MS && latch_to_java < MESSAGE_MS);
}

/* ---- the other cases of redisson_java_cases.h, on names of every master ------------------------
 */

static void test_cluster_rw_mixed(void **state)
{
    (void)state;
    rjc_rw_mixed(g_peer, g_c, "rjk:rw");
}

static void test_cluster_fenced_tokens(void **state)
{
    (void)state;
    rjc_fenced(g_peer, g_c, "rjk:fenced");
}

static void test_cluster_fair_one_side_queues(void **state)
{
    (void)state;
    rjc_fair_one_side(g_peer, g_c, "rjk:fair");
}

/* The mixed queue of 20 of test_redisson_java_lock's test_fair_mixed_queue on the master that
 * serves the name: every rlock waiter served, exclusion kept, and the same divergence
 * (docs/compatibility.md). */
static void test_cluster_fair_mixed_queue(void **state)
{
    (void)state;
    rjc_fair_env e = {.p = g_peer, .c = g_c, .queue_server = tc_cluster_owner};
    rjc_fair_result r = rjc_fair_queue(&e, "rjk:fair:mixed", 'c', "cjcjcjcjcjcjcjcjcjcj", 8000);
    assert_int_equal(r.not_granted_c, 0);
    assert_true(r.inversions > 0 || r.not_granted_j > 0);
}

static void test_cluster_semaphores(void **state)
{
    (void)state;
    rjc_semaphores(g_peer, g_c, "rjk:sem", "rjk:lease");
}

static void test_cluster_force_inspect_watchdogs(void **state)
{
    (void)state;
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.watchdog_timeout_ms = RJC_WATCHDOG_MS;
    rlock_client *cw = tc_client(&o);
    rjc_force(g_peer, g_c, "rjk:force");
    rjc_inspect(g_peer, g_c, "rjk:inspect");
    rjc_watchdogs(g_peer, g_c, cw, "rjk:wd:java", "rjk:wd:c");
    rlock_client_free(cw);
}

/* Members on different slots (and masters): Redisson takes them one by one, as rlock does. */
static void test_cluster_multilock(void **state)
{
    (void)state;
    static const char *const names[3] = {"rjk:m:a", "rjk:m:b", "rjk:m:c"};
    rjc_multilock(g_peer, g_c, names);
}

/* ---- a CLUSTER FAILOVER in the middle of a mixed RLock stress ---------------------------------
 */

/* Explicit leases on both sides, so a release lost in the switch frees the lock by itself. */
#define FO_LEASE_MS 5000
#define FO_ITERS    50

typedef struct fo_thread {
    rlock_client *c;
    rlock *l;
    rj_checker *ck;
    int done, lock_errors, unlock_errors;
} fo_thread;

/* At least FO_ITERS sections, and on until the checker's slot 15 is raised; a lock that fails in
 * the switch is retried, an unlock that fails is left to its lease. */
static void *fo_run(void *arg)
{
    fo_thread *t = arg;
    while (t->done < FO_ITERS || atomic_load(&t->ck->slot[15].writers) == 0) {
        int r = rlock_try_lock(t->l, 2000, FO_LEASE_MS);
        if (r != RLOCK_OK) {
            t->lock_errors += r != RLOCK_ETIMEDOUT;
            rh_sleep_ms(20);
            continue;
        }
        rj_ck_enter(t->ck, 0);
        usleep(2000);
        rj_ck_leave(t->ck, 0);
        t->done++;
        t->unlock_errors += rlock_unlock(t->l) != RLOCK_OK;
    }
    return NULL;
}

/* The replica of name's master takes over (CLUSTER FAILOVER) and every node learns it. */
static void switch_owner(const char *name)
{
    rh_server *old = tc_cluster_owner(name);
    rh_server *replica = rc_replica_of(tc_cl, old);
    assert_non_null(replica);
    assert_int_equal(rc_failover(tc_cl, replica, 30000), 0);
    for (int64_t end = rh_now_ms() + 5000; tc_cluster_owner(name) != replica;) {
        assert_true(rh_now_ms() < end);
        rh_sleep_ms(20);
    }
}

/* 2 rlock threads (clients of their own) and 2 Redisson threads take one lock while the replica
 * of its master takes over, and go on for 500 ms after: no two inside, every section counted. */
static void test_cluster_failover_mixed_stress(void **state)
{
    (void)state;
    const char *name = "rjk:failover";
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    int ids[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = rj_send(g_peer, i == 0 ? "f0" : "f1", "fstress %s %d 2000 %s %d", name, FO_ITERS,
                         path, FO_LEASE_MS);
    }
    fo_thread t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (fo_thread){.c = tc_cluster_client(2000), .ck = ck};
        t[i].l = tc_open(t[i].c, RLOCK_REENTRANT, name);
        pthread_create(&th[i], NULL, fo_run, &t[i]);
    }
    rh_sleep_ms(300);
    long long before = atomic_load(&ck->slot[0].entries);
    switch_owner(name);
    long long after = atomic_load(&ck->slot[0].entries);
    rh_sleep_ms(500);
    atomic_store(&ck->slot[15].writers, 1);
    long long java = 0, c = 0;
    for (int i = 0; i < 2; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        print_message("Redisson thread %d: %s (sections, lock errors, unlock errors)\n", i, r);
        int sections = 0;
        assert_int_equal(sscanf(r, "ok %d", &sections), 1);
        free(r);
        java += sections;
        pthread_join(th[i], NULL);
        print_message("rlock thread %d: %d sections, %d lock errors, %d unlock errors\n", i,
                      t[i].done, t[i].lock_errors, t[i].unlock_errors);
        assert_true(sections >= FO_ITERS && t[i].done >= FO_ITERS);
        c += t[i].done;
        rlock_free(t[i].l);
        rlock_client_free(t[i].c);
    }
    long long entries = atomic_load(&ck->slot[0].entries);
    print_message("the failover began after %lld and ended after %lld of %lld sections; %lld "
                  "violations\n",
                  before, after, entries, (long long)atomic_load(&ck->slot[0].violations));
    assert_true(before > 0 && after < entries);
    assert_int_equal(atomic_load(&ck->slot[0].violations), 0);
    assert_int_equal(entries, java + c);
    rj_checker_free(ck, path);
}

/* After the switch, wake-ups both ways on the lock whose master changed. */
static void test_cluster_wakeups_after_failover(void **state)
{
    (void)state;
    double to_c, to_java;
    lock_round("rjk:failover", &to_c, &to_java);
    print_message("after the failover: Redisson unlock -> rlock grant %.1f ms, rlock unlock -> "
                  "Redisson grant %.1f ms\n",
                  to_c, to_java);
    assert_true(to_c < MESSAGE_MS && to_java < MESSAGE_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_lock_wakeups),
        cmocka_unit_test(test_cluster_lock_mixed_stress),
        cmocka_unit_test(test_cluster_semaphore_latch_wakeups),
        cmocka_unit_test(test_cluster_rw_mixed),
        cmocka_unit_test(test_cluster_fenced_tokens),
        cmocka_unit_test(test_cluster_fair_one_side_queues),
        cmocka_unit_test(test_cluster_fair_mixed_queue),
        cmocka_unit_test(test_cluster_semaphores),
        cmocka_unit_test(test_cluster_force_inspect_watchdogs),
        cmocka_unit_test(test_cluster_multilock),
        cmocka_unit_test(test_cluster_failover_mixed_stress),
        cmocka_unit_test(test_cluster_wakeups_after_failover),
    };
    /* RJ_TEST=<glob> runs the matching tests only (for a look at one case). */
    if (getenv("RJ_TEST") != NULL) {
        cmocka_set_test_filter(getenv("RJ_TEST"));
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
