/*
 * rlock against the released Redisson (the Java peer of redisson_java.h) on one redis-server:
 * RSemaphore (the permit bound across both sides, wake-ups both ways), RPermitExpirableSemaphore
 * (a leased permit released by the other side's id) and RCountDownLatch (waiters woken by the
 * other side's count-down).
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

#include "redis_harness.h"
#include "redisson_java.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* The wake-up bound across sides, from the release call to the other side's return: the median
 * of a test's rounds must be within WAKE_MS, and every round within MESSAGE_MS, far below the
 * waits (10 s) and leases (60 s) that would end a wait without the release's message. */
#define WAKE_MS    50.0
#define MESSAGE_MS 1000.0

/* The median of n <= 16 values. */
static double median(const double *v, int n)
{
    double s[16];
    memcpy(s, v, sizeof(double) * (size_t)n);
    for (int i = 1; i < n; i++) {
        for (int k = i; k > 0 && s[k - 1] > s[k]; k--) {
            double t = s[k];
            s[k] = s[k - 1];
            s[k - 1] = t;
        }
    }
    return s[n / 2];
}

static rh_server *g_srv;
static rj_peer *g_peer;
static rlock_client *g_c;

static int group_setup(void **state)
{
    rj_require(state);
    g_srv = tc_start();
    g_peer = rj_start(g_srv, 0);
    g_c = rj_client(g_srv);
    print_message("Redisson %s, client id %s\n", rj_version(g_peer), rj_id(g_peer));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rlock_client_free(g_c);
    rj_stop(g_peer);
    rh_free(g_srv);
    return 0;
}

/* Waits until channel has want listeners, then lets the waiters' first attempts end. */
static void await_listeners(const char *channel, long long want)
{
    assert_true(tc_wait_listeners(g_srv, channel, want, 5000));
    rh_sleep_ms(100);
}

/* ---- RSemaphore --------------------------------------------------------------------------- */

typedef struct sem_thread {
    rlock_semaphore *s;
    rj_checker *ck;
    int failures;
} sem_thread;

static void *sem_run(void *arg)
{
    sem_thread *t = arg;
    for (int i = 0; i < 60; i++) {
        if (rlock_semaphore_acquire(t->s, 1, 30000) != RLOCK_OK) {
            t->failures++;
            continue;
        }
        rj_ck_permit_enter(t->ck, 0, 3);
        usleep(300);
        rj_ck_read_leave(t->ck, 0);
        t->failures += rlock_semaphore_release(t->s, 1) != RLOCK_OK;
    }
    return NULL;
}

/* 3 permits, 3 rlock threads and 3 Redisson threads taking one each 60 times: never more than 3
 * holders inside, and all 3 permits back at the end. */
static void test_semaphore_permit_bound(void **state)
{
    (void)state;
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    rj_expect(g_peer, "s0", "true", "sset rj:sem 3");
    int ids[3];
    for (int i = 0; i < 3; i++) {
        char worker[8];
        snprintf(worker, sizeof(worker), "s%d", i);
        ids[i] = rj_send(g_peer, worker, "sstress rj:sem 60 300 %s 0 3", path);
    }
    sem_thread t[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (sem_thread){.s = rlock_semaphore_open(g_c, "rj:sem"), .ck = ck};
        pthread_create(&th[i], NULL, sem_run, &t[i]);
    }
    for (int i = 0; i < 3; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        assert_string_equal(r, "ok 60");
        free(r);
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failures, 0);
    }
    rj_ck_slot *s = &ck->slot[0];
    print_message("semaphore of 3: %lld sections, %lld violations\n",
                  (long long)atomic_load(&s->reads), (long long)atomic_load(&s->violations));
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(atomic_load(&s->reads), 360);
    assert_int_equal(rlock_semaphore_available(t[0].s), 3);
    char *r = rj_call(g_peer, "s0", "savail rj:sem");
    assert_string_equal(r, "3");
    free(r);
    for (int i = 0; i < 3; i++) {
        rlock_semaphore_free(t[i].s);
    }
    rj_checker_free(ck, path);
}

typedef struct sem_wait {
    rlock_semaphore *s;
} sem_wait;

static int sem_acquire_one(void *arg)
{
    return rlock_semaphore_acquire(((sem_wait *)arg)->s, 1, 10000);
}

/* One round on name (1 permit): a Redisson release wakes a waiting rlock thread, then an rlock
 * release a waiting Redisson thread; the two wake-ups in ms. */
static void semaphore_round(const char *name, double *to_c, double *to_java)
{
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_sc:{%s}", name);
    rlock_semaphore *s = rlock_semaphore_open(g_c, name);
    rj_expect(g_peer, "w", "true", "sset %s 1", name);
    rj_expect(g_peer, "w", "1", "sacq %s 1 0", name);
    sem_wait sw = {.s = s};
    tc_bg b;
    tc_bg_start(&b, sem_acquire_one, &sw);
    await_listeners(channel, 1);
    char *r = rj_call(g_peer, "w", "srel %s 1", name);
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    *to_c = (double)b.done_at - released;
    int id = rj_send(g_peer, "w", "sacq %s 1 10000", name);
    await_listeners(channel, 1);
    double c_released = rj_now_ms();
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    *to_java = rj_reply_ms(r) - c_released;
    free(r);
    rlock_semaphore_free(s);
}

/* Semaphore wake-ups both ways, 5 rounds after one warm-up round (class loading and the JIT on
 * the Java side): each woken by the release's message, the median within WAKE_MS. */
static void test_semaphore_wakeups_both_ways(void **state)
{
    (void)state;
    double to_c[5], to_java[5];
    semaphore_round("rj:semw:warm", &to_c[0], &to_java[0]);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "rj:semw:%d", i);
        semaphore_round(name, &to_c[i], &to_java[i]);
        print_message("semaphore round %d: Redisson release -> rlock acquire %.1f ms, rlock "
                      "release -> Redisson acquire %.1f ms\n",
                      i, to_c[i], to_java[i]);
        assert_true(to_c[i] < MESSAGE_MS && to_java[i] < MESSAGE_MS);
    }
    assert_true(median(to_c, 5) < WAKE_MS && median(to_java, 5) < WAKE_MS);
}

/* ---- RPermitExpirableSemaphore ------------------------------------------------------------- */

/* A leased permit rlock took is released by Redisson's tryRelease(id), and one Redisson took by
 * rlock_semaphore_release_leased(id); a released id is refused on both sides afterwards. */
static void test_leased_permit_released_by_other_side(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rj:lease");
    rj_expect(g_peer, "p", "true", "pset rj:lease 2");
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 1);
    rj_expect(g_peer, "p", "true", "prel rj:lease %s", id);
    assert_int_equal(rlock_semaphore_available(s), 2);
    rj_expect(g_peer, "p", "false", "prel rj:lease %s", id);
    char *r = rj_call(g_peer, "p", "pacq rj:lease 0 60000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    print_message("rlock permit id %s, Redisson permit id %s\n", id, java_id);
    assert_int_equal(strlen(java_id), RLOCK_PERMIT_ID_LEN);
    r = rj_call(g_peer, "p", "pavail rj:lease");
    assert_string_equal(r, "1");
    free(r);
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2);
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_ENOTOWNER);
    rlock_semaphore_free(s);
}

typedef struct leased_wait {
    rlock_semaphore *s;
    char id[RLOCK_PERMIT_ID_LEN + 1];
} leased_wait;

static int leased_acquire(void *arg)
{
    leased_wait *w = arg;
    return rlock_semaphore_acquire_leased(w->s, 10000, 60000, w->id);
}

/* Every permit leased by Redisson for 60 s: an rlock waiter is woken by Redisson's release (its
 * message, not the lease). */
static void test_leased_release_wakes_rlock(void **state)
{
    (void)state;
    leased_wait w = {.s = rlock_semaphore_open(g_c, "rj:leasew")};
    rj_expect(g_peer, "p", "true", "pset rj:leasew 1");
    char *r = rj_call(g_peer, "p", "pacq rj:leasew 0 60000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    tc_bg b;
    tc_bg_start(&b, leased_acquire, &w);
    await_listeners("redisson_sc:{rj:leasew}", 1);
    r = rj_call(g_peer, "p", "prel rj:leasew %s", java_id);
    assert_string_equal(strtok(r, " "), "true");
    double released = strtod(strtok(NULL, " "), NULL);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    print_message("leased: Redisson tryRelease -> rlock acquire %.1f ms\n",
                  (double)b.done_at - released);
    assert_true((double)b.done_at - released < MESSAGE_MS);
    assert_int_equal(rlock_semaphore_release_leased(w.s, w.id), RLOCK_OK);
    rlock_semaphore_free(w.s);
}

/* ---- RCountDownLatch ---------------------------------------------------------------------- */

static int latch_await(void *arg)
{
    return rlock_latch_await(arg, 10000);
}

/* Redisson counts down the latch rlock threads (and a Redisson thread) wait on, and rlock the one
 * Redisson waits on: each waiter woken by the count-down's message. */
static void test_latch_woken_by_other_side(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(g_c, "rj:latch");
    rj_expect(g_peer, "l", "true", "lset rj:latch 2");
    assert_int_equal(rlock_latch_count(l), 2);
    tc_bg b[2];
    tc_bg_start(&b[0], latch_await, l);
    tc_bg_start(&b[1], latch_await, l);
    int jid = rj_send(g_peer, "l2", "lawait rj:latch 10000");
    await_listeners("redisson_countdownlatch__channel__{rj:latch}", 2);
    rj_expect(g_peer, "l", "ok", "ldown rj:latch");
    assert_int_equal(rlock_latch_count(l), 1);
    assert_int_equal(atomic_load(&b[0].result), TC_BG_RUNNING);
    char *r = rj_call(g_peer, "l", "ldown rj:latch");
    double down = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b[0]), RLOCK_OK);
    assert_int_equal(tc_bg_join(&b[1]), RLOCK_OK);
    r = rj_wait(g_peer, jid, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    free(r);
    double to_c = (double)b[1].done_at - down;
    /* The other way: rlock sets and counts down, Redisson waits. */
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    jid = rj_send(g_peer, "l2", "lawait rj:latch 10000");
    await_listeners("redisson_countdownlatch__channel__{rj:latch}", 1);
    double c_down = rj_now_ms();
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    r = rj_wait(g_peer, jid, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - c_down;
    free(r);
    print_message("latch: Redisson countDown -> rlock await %.1f ms, rlock count down -> Redisson "
                  "await %.1f ms\n",
                  to_c, to_java);
    assert_true(to_c < MESSAGE_MS && to_java < MESSAGE_MS);
    rlock_latch_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semaphore_wakeups_both_ways),
        cmocka_unit_test(test_semaphore_permit_bound),
        cmocka_unit_test(test_leased_permit_released_by_other_side),
        cmocka_unit_test(test_leased_release_wakes_rlock),
        cmocka_unit_test(test_latch_woken_by_other_side),
    };
    /* RJ_TEST=<glob> runs the matching tests only (for a look at one case). */
    if (getenv("RJ_TEST") != NULL) {
        cmocka_set_test_filter(getenv("RJ_TEST"));
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
