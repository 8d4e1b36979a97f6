/*
 * The deployment-independent cases of the Redisson peer (see redisson_java_cases.h): they wait
 * for the other side's subscription by time (SUBSCRIBE_MS), not by PUBSUB NUMSUB, since on a
 * Cluster or after a failover the test does not know which node the subscription went to.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redisson_java_cases.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* Time given to a waiter to subscribe before the release it waits for. */
#define SUBSCRIBE_MS 300
/* Every wake-up within this (the waits are 10-15 s, the leases 60 s or the watchdog's). */
#define MESSAGE_MS 1000.0
#define ITERS      40
/* What rjc_fair_queue() adds to an rlock waiter's wait over the Redisson waiters' wait_ms. */
#define RLOCK_WAITER_SLACK_MS 10000

/* An rlock thread of a stress: ITERS sections on its own handle under the checker. */
typedef struct ck_thread {
    rlock *l;
    rlock_semaphore *s;
    rj_checker *ck;
    int slot, read, failures;
} ck_thread;

static void *ck_run(void *arg)
{
    ck_thread *t = arg;
    for (int i = 0; i < ITERS; i++) {
        int r = t->s != NULL ? rlock_semaphore_acquire(t->s, 1, 30000) : rlock_lock(t->l, 30000);
        if (r != RLOCK_OK) {
            t->failures++;
            continue;
        }
        if (t->s != NULL) {
            rj_ck_permit_enter(t->ck, t->slot, 2);
        } else if (t->read) {
            rj_ck_read_enter(t->ck, t->slot);
        } else {
            rj_ck_enter(t->ck, t->slot);
        }
        usleep(200);
        if (t->s != NULL || t->read) {
            rj_ck_read_leave(t->ck, t->slot);
        } else {
            rj_ck_leave(t->ck, t->slot);
        }
        r = t->s != NULL ? rlock_semaphore_release(t->s, 1) : rlock_unlock(t->l);
        t->failures += r != RLOCK_OK;
    }
    return NULL;
}

/* Starts n rlock threads (t[i] filled by the caller), waits for the Java requests ids and then
 * for the threads: every reply is want, no rlock call failed. */
static void run_both(ck_thread *t, int n, rj_peer *p, const int *ids, int nids, const char *want)
{
    pthread_t th[4];
    for (int i = 0; i < n; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, ck_run, &t[i]), 0);
    }
    for (int i = 0; i < nids; i++) {
        char *r = rj_wait(p, ids[i], 120000);
        assert_non_null(r);
        assert_string_equal(r, want);
        free(r);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failures, 0);
    }
}

static void rw_round(rj_peer *p, rlock_client *c, const char *name, int java_reads)
{
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    int ids[2];
    for (int i = 0; i < 2; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "rw%d", i);
        ids[i] = rj_send(p, worker, "stress %s %s %d 200 %s 0", java_reads ? "read" : "write", name,
                         ITERS, path);
    }
    ck_thread t[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (ck_thread){.l = tc_open(c, java_reads ? RLOCK_WRITE : RLOCK_READ, name),
                           .ck = ck,
                           .read = !java_reads};
    }
    char want[16];
    snprintf(want, sizeof(want), "ok %d", ITERS);
    run_both(t, 2, p, ids, 2, want);
    rj_ck_slot *s = &ck->slot[0];
    print_message("%s: Redisson %s x2, rlock %s x2: %lld sections, %lld violations\n", name,
                  java_reads ? "readers" : "writers", java_reads ? "writers" : "readers",
                  (long long)(atomic_load(&s->entries) + atomic_load(&s->reads)),
                  (long long)atomic_load(&s->violations));
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(atomic_load(&s->entries) + atomic_load(&s->reads), 4 * ITERS);
    for (int i = 0; i < 2; i++) {
        rlock_free(t[i].l);
    }
    rj_checker_free(ck, path);
}

void rjc_rw_mixed(rj_peer *p, rlock_client *c, const char *name)
{
    rw_round(p, c, name, 1);
    rw_round(p, c, name, 0);
}

void rjc_fenced(rj_peer *p, rlock_client *c, const char *name)
{
    rlock *l = tc_open(c, RLOCK_REENTRANT, name);
    uint64_t last = 0;
    for (int i = 0; i < 5; i++) {
        char *r = rj_call(p, "t1", "try fenced %s 5000 -1", name);
        unsigned long long token = 0;
        assert_int_equal(sscanf(r, "1 %*f %llu", &token), 1);
        free(r);
        rj_expect(p, "t1", "ok", "unlock fenced %s", name);
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        uint64_t mine = rlock_token(l);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        print_message("%s round %d: Redisson token %llu, rlock token %" PRIu64 "\n", name, i, token,
                      mine);
        assert_true(token > last);
        assert_true(mine > token);
        last = mine;
    }
    rlock_free(l);
}

/* 4 rlock fair waiters, 150 ms apart, behind a Redisson holder: granted in their order. */
static void fair_rlock_queue(rj_peer *p, rlock_client *c, const char *name)
{
    rj_expect(p, "fh", "ok", "lock fair %s 60000", name);
    rlock *l[4];
    tc_holder h[4];
    for (int i = 0; i < 4; i++) {
        l[i] = tc_open(c, RLOCK_FAIR, name);
        tc_holder_start(&h[i], l[i], 15000, -1, 20);
        rh_sleep_ms(150);
    }
    rj_expect(p, "fh", "ok", "unlock fair %s", name);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tc_holder_join(&h[i]), RLOCK_OK);
        print_message("%s: rlock waiter %d granted at +%" PRId64 " ms\n", name, i,
                      i == 0 ? 0 : h[i].got_at - h[i - 1].got_at);
        assert_true(i == 0 || h[i].got_at > h[i - 1].got_at);
        rlock_free(l[i]);
    }
}

/* 4 Redisson fair waiters, 150 ms apart, behind an rlock holder: granted in their order. */
static void fair_java_queue(rj_peer *p, rlock_client *c, const char *name)
{
    rlock *l = tc_open(c, RLOCK_FAIR, name);
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    int ids[4];
    for (int i = 0; i < 4; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "fq%d", i);
        ids[i] = rj_send(p, worker, "try fair %s 15000 -1", name);
        rj_send(p, worker, "unlock fair %s", name); /* runs right after its grant */
        rh_sleep_ms(150);
    }
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    double prev = 0;
    for (int i = 0; i < 4; i++) {
        char *r = rj_wait(p, ids[i], 20000);
        assert_non_null(r);
        assert_int_equal(r[0], '1');
        double got = rj_reply_ms(r);
        free(r);
        print_message("%s: Redisson waiter %d granted at +%.1f ms\n", name, i,
                      i == 0 ? 0.0 : got - prev);
        assert_true(i == 0 || got > prev);
        prev = got;
    }
    rlock_free(l);
}

void rjc_fair_one_side(rj_peer *p, rlock_client *c, const char *name)
{
    fair_rlock_queue(p, c, name);
    fair_java_queue(p, c, name);
}

static void semaphore_bound(rj_peer *p, rlock_client *c, const char *name)
{
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    rj_expect(p, "s", "true", "sset %s 2", name);
    int ids[2];
    for (int i = 0; i < 2; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "ss%d", i);
        ids[i] = rj_send(p, worker, "sstress %s %d 300 %s 0 2", name, ITERS, path);
    }
    ck_thread t[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (ck_thread){.s = rlock_semaphore_open(c, name), .ck = ck};
        assert_non_null(t[i].s);
    }
    char want[16];
    snprintf(want, sizeof(want), "ok %d", ITERS);
    run_both(t, 2, p, ids, 2, want);
    rj_ck_slot *s = &ck->slot[0];
    print_message("%s: semaphore of 2, %lld sections, %lld violations\n", name,
                  (long long)atomic_load(&s->reads), (long long)atomic_load(&s->violations));
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(atomic_load(&s->reads), 4 * ITERS);
    assert_int_equal(rlock_semaphore_available(t[0].s), 2);
    for (int i = 0; i < 2; i++) {
        rlock_semaphore_free(t[i].s);
    }
    rj_checker_free(ck, path);
}

static void leased_cross_release(rj_peer *p, rlock_client *c, const char *name)
{
    rlock_semaphore *s = rlock_semaphore_open(c, name);
    assert_non_null(s);
    rj_expect(p, "p", "true", "pset %s 2", name);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    rj_expect(p, "p", "true", "prel %s %s", name, id);
    rj_expect(p, "p", "false", "prel %s %s", name, id);
    char *r = rj_call(p, "p", "pacq %s 0 60000", name);
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    assert_int_equal(strlen(java_id), RLOCK_PERMIT_ID_LEN);
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2);
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_ENOTOWNER);
    rlock_semaphore_free(s);
}

void rjc_semaphores(rj_peer *p, rlock_client *c, const char *name, const char *leased)
{
    semaphore_bound(p, c, name);
    leased_cross_release(p, c, leased);
}

static int sem_acquire(void *arg)
{
    return rlock_semaphore_acquire(arg, 1, 10000);
}

void rjc_semaphore_wakeups(rj_peer *p, rlock_client *c, const char *name)
{
    rlock_semaphore *s = rlock_semaphore_open(c, name);
    assert_non_null(s);
    rj_expect(p, "w", "true", "sset %s 1", name);
    rj_expect(p, "w", "1", "sacq %s 1 0", name);
    tc_bg b;
    tc_bg_start(&b, sem_acquire, s);
    rh_sleep_ms(SUBSCRIBE_MS);
    char *r = rj_call(p, "w", "srel %s 1", name);
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    double to_c = (double)b.done_at - released;
    int id = rj_send(p, "w", "sacq %s 1 10000", name);
    rh_sleep_ms(SUBSCRIBE_MS);
    released = rj_now_ms();
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    r = rj_wait(p, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - released;
    free(r);
    print_message("%s: Redisson release -> rlock %.1f ms, rlock release -> Redisson %.1f ms\n",
                  name, to_c, to_java);
    assert_true(to_c < MESSAGE_MS && to_java < MESSAGE_MS);
    rlock_semaphore_free(s);
}

static int latch_await(void *arg)
{
    return rlock_latch_await(arg, 10000);
}

void rjc_latch(rj_peer *p, rlock_client *c, const char *name)
{
    rlock_latch *l = rlock_latch_open(c, name);
    assert_non_null(l);
    rj_expect(p, "l", "true", "lset %s 1", name);
    tc_bg b;
    tc_bg_start(&b, latch_await, l);
    rh_sleep_ms(SUBSCRIBE_MS);
    char *r = rj_call(p, "l", "ldown %s", name);
    double down = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_bg_join(&b), RLOCK_OK);
    double to_c = (double)b.done_at - down;
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    int id = rj_send(p, "l2", "lawait %s 10000", name);
    rh_sleep_ms(SUBSCRIBE_MS);
    down = rj_now_ms();
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    r = rj_wait(p, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - down;
    free(r);
    print_message("%s: Redisson countDown -> rlock %.1f ms, rlock count_down -> Redisson %.1f ms\n",
                  name, to_c, to_java);
    assert_true(to_c < MESSAGE_MS && to_java < MESSAGE_MS);
    rlock_latch_free(l);
}

void rjc_force(rj_peer *p, rlock_client *c, const char *name)
{
    rlock *l = tc_open(c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    int id = rj_send(p, "f1", "try lock %s 10000 -1", name);
    rh_sleep_ms(SUBSCRIBE_MS);
    double forced = rj_now_ms();
    assert_int_equal(rlock_force_unlock(l), 1);
    char *r = rj_wait(p, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - forced;
    free(r);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    tc_holder h;
    tc_holder_start(&h, l, 10000, -1, 0);
    rh_sleep_ms(SUBSCRIBE_MS);
    r = rj_call(p, "f2", "force lock %s", name);
    assert_string_equal(strtok(r, " "), "true");
    double java_forced = strtod(strtok(NULL, " "), NULL);
    free(r);
    assert_int_equal(tc_holder_join(&h), RLOCK_OK);
    double to_c = (double)h.got_at - java_forced;
    print_message("%s: rlock force -> Redisson grant %.1f ms, Redisson force -> rlock grant "
                  "%.1f ms\n",
                  name, to_java, to_c);
    assert_true(to_java < MESSAGE_MS && to_c < MESSAGE_MS);
    rj_expect(p, "f1", "err", "unlock lock %s", name);
    rlock_free(l);
}

void rjc_inspect(rj_peer *p, rlock_client *c, const char *name)
{
    rj_expect(p, "i1", "ok", "lock lock %s -1", name);
    rj_expect(p, "i1", "ok", "lock lock %s -1", name);
    char *owner = rj_call(p, "i1", "owner");
    rlock_lock_info *info = NULL;
    assert_int_equal(rlock_inspect(c, name, &info), RLOCK_OK);
    assert_int_equal(info->type, RLOCK_TYPE_REENTRANT);
    assert_int_equal(info->locked, 1);
    assert_int_equal(info->n_holders, 1);
    assert_string_equal(info->holders[0].owner, owner);
    assert_int_equal(info->holders[0].count, 2);
    assert_true(info->ttl_ms > 0 && info->ttl_ms <= RJC_WATCHDOG_MS);
    rlock_lock_info_free(info);
    free(owner);
    rj_expect(p, "i1", "ok", "unlock lock %s", name);
    rj_expect(p, "i1", "ok", "unlock lock %s", name);
}

void rjc_watchdogs(rj_peer *p, rlock_client *c, rlock_client *cw, const char *a, const char *b)
{
    rj_expect(p, "d1", "ok", "lock lock %s -1", a);
    rlock *mine = tc_open(cw, RLOCK_REENTRANT, b);
    assert_int_equal(rlock_lock(mine, -1), RLOCK_OK);
    int id = rj_send(p, "d2", "try lock %s %d -1", b, 3 * RJC_WATCHDOG_MS);
    rlock *l = tc_open(c, RLOCK_REENTRANT, a);
    assert_int_equal(rlock_try_lock(l, 3 * RJC_WATCHDOG_MS, -1), RLOCK_ETIMEDOUT);
    char *r = rj_wait(p, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '0');
    free(r);
    assert_int_equal(rlock_is_locked(l), 1);
    rj_expect(p, "d1", "ok", "unlock lock %s", a);
    assert_int_equal(rlock_try_lock(l, 1000, -1), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_held(mine), 1);
    assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    rj_expect(p, "d2", "1", "try lock %s 1000 -1", b);
    rj_expect(p, "d2", "ok", "unlock lock %s", b);
    rlock_free(mine);
    rlock_free(l);
}

void rjc_multilock(rj_peer *p, rlock_client *c, const char *const names[3])
{
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    int ids[2];
    for (int i = 0; i < 2; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "ml%d", i);
        ids[i] = rj_send(p, worker, "mstress %d 200 %s %s %s %s", ITERS, path, names[0], names[1],
                         names[2]);
    }
    ck_thread t[3];
    for (int k = 0; k < 3; k++) {
        t[k] = (ck_thread){.l = tc_open(c, RLOCK_REENTRANT, names[k]), .ck = ck, .slot = k};
    }
    char want[16];
    snprintf(want, sizeof(want), "ok %d", ITERS);
    run_both(t, 3, p, ids, 2, want);
    for (int k = 0; k < 3; k++) {
        print_message("%s: %lld sections, %lld violations\n", names[k],
                      (long long)atomic_load(&ck->slot[k].entries),
                      (long long)atomic_load(&ck->slot[k].violations));
        assert_int_equal(atomic_load(&ck->slot[k].violations), 0);
        assert_int_equal(atomic_load(&ck->slot[k].entries), 3 * ITERS);
        rlock_free(t[k].l);
    }
    rj_checker_free(ck, path);
}

/* ---- the fair queue: mixed queues and their inversions ------------------------------------- */

/* The number of pairs (i < j) whose grant times are in the opposite order of their arrival. */
static int inversions(const double *got, int n)
{
    int inv = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            inv += got[i] > got[j];
        }
    }
    return inv;
}

/* One waiter of a fair queue: an rlock thread or a Redisson thread that waits, holds 20 ms and
 * unlocks. */
typedef struct fair_waiter {
    int java; /* 0 rlock, 1 Redisson, 2 Redisson on the peer e->dead that is killed */
    rlock *l;
    tc_holder h;
    int lock_id, unlock_id;
    double got; /* when its lock call returned (monotonic ms) */
    int granted;
} fair_waiter;

/* Enqueues waiter i (waiting up to wait_ms), then waits until it is in Redisson's queue. */
static void fair_enqueue(const rjc_fair_env *e, const char *name, int i, fair_waiter *w,
                         int64_t wait_ms)
{
    if (!w->java) {
        w->l = tc_open(e->c, RLOCK_FAIR, name);
        /* Longer than the Redisson waiters' wait_ms: an rlock waiter's wait starts when it
         * queues, and queueing 20 waiters took up to 2.4 s on a busy box before the release;
         * the callers assert that every rlock waiter is served. */
        tc_holder_start(&w->h, w->l, wait_ms + RLOCK_WAITER_SLACK_MS, -1, 20);
    } else {
        rj_peer *p = w->java == 2 ? e->dead : e->p;
        char worker[16];
        snprintf(worker, sizeof(worker), "q%d", i);
        /* A dead peer's waiter calls lock(): its deadline is then the holder's remaining lease
         * plus fairLockWaitTimeout (tryLock puts its own wait time in place of the latter). */
        if (w->java == 2) {
            w->lock_id = rj_send(p, worker, "lock fair %s -1", name);
        } else {
            w->lock_id = rj_send(p, worker, "try fair %s %lld -1", name, (long long)wait_ms);
        }
        rj_send(p, worker, "sleep 20");
        w->unlock_id = rj_send(p, worker, "unlock fair %s", name);
    }
    char queue[128];
    snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
    const char *llen[] = {"LLEN", queue, NULL};
    int64_t deadline = rh_now_ms() + 5000;
    while (rh_cmd_int(e->queue_server(queue), llen) != i + 1 && rh_now_ms() < deadline) {
        rh_sleep_ms(2);
    }
    assert_int_equal(rh_cmd_int(e->queue_server(queue), llen), i + 1);
}

/* Collects waiter w's outcome. */
static void fair_collect(rj_peer *p, fair_waiter *w)
{
    if (!w->java) {
        int rc = tc_holder_join(&w->h);
        assert_true(rc == RLOCK_OK || rc == RLOCK_ETIMEDOUT);
        w->granted = rc == RLOCK_OK;
        w->got = (double)w->h.got_at;
        rlock_free(w->l);
        return;
    }
    if (w->java == 2) {
        return; /* killed before the release: never granted, counted nowhere */
    }
    char *r = rj_wait(p, w->lock_id, 60000);
    assert_non_null(r);
    w->granted = r[0] == '1';
    w->got = rj_reply_ms(r);
    free(r);
    r = rj_wait(p, w->unlock_id, 10000); /* "err" when it was not granted */
    assert_non_null(r);
    free(r);
}

/* Kills e->dead (its waiter stays in the queue), releases the holder; the release's time. */
static double fair_release(const rjc_fair_env *e, const char *name, char holder, rlock *mine)
{
    if (e->dead != NULL) {
        rj_kill(e->dead);
    }
    if (holder == 'c') {
        assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    } else {
        rj_expect(e->p, "qh", "ok", "unlock fair %s", name);
    }
    return rj_now_ms();
}

/* Sorts the m grant times of got into sorted and checks exclusion: grants a hold apart. */
static void fair_check_gaps(const double *got, double *sorted, int m)
{
    memcpy(sorted, got, sizeof(double) * (size_t)m);
    for (int i = 1; i < m; i++) { /* insertion sort, then the gaps between grants */
        for (int k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
            double t = sorted[k];
            sorted[k] = sorted[k - 1];
            sorted[k - 1] = t;
        }
    }
    for (int i = 1; i < m; i++) {
        assert_true(sorted[i] - sorted[i - 1] >= 19.0);
    }
}

rjc_fair_result rjc_fair_queue(const rjc_fair_env *e, const char *name, char holder,
                               const char *pattern, int64_t wait_ms)
{
    enum { MAX = 32 };
    int n = (int)strlen(pattern);
    assert_true(n <= MAX);
    rlock *mine = NULL;
    if (holder == 'c') {
        mine = tc_open(e->c, RLOCK_FAIR, name);
        assert_int_equal(rlock_lock(mine, e->hold_ms > 0 ? e->hold_ms : -1), RLOCK_OK);
    } else {
        rj_expect(e->p, "qh", "ok", "lock fair %s -1", name);
    }
    fair_waiter w[MAX];
    double arrived = rj_now_ms();
    for (int i = 0; i < n; i++) {
        w[i] = (fair_waiter){.java = pattern[i] == 'j' ? 1 : pattern[i] == 'd' ? 2 : 0};
        fair_enqueue(e, name, i, &w[i], wait_ms);
    }
    double released = fair_release(e, name, holder, mine);
    rjc_fair_result res = {0};
    double got[MAX], sorted[MAX];
    int m = 0;
    for (int i = 0; i < n; i++) {
        fair_collect(e->p, &w[i]);
        if (w[i].granted) {
            got[m++] = w[i].got;
        } else if (w[i].java == 1) {
            res.not_granted_j++;
        } else if (w[i].java == 0) {
            res.not_granted_c++;
        }
    }
    res.inversions = inversions(got, m);
    fair_check_gaps(got, sorted, m);
    res.span_ms = m > 0 ? sorted[m - 1] - sorted[0] : 0;
    res.queue_ms = released - arrived;
    res.first_ms = m > 0 ? sorted[0] - released : 0;
    print_message("fair queue %s behind %s holder: %d inversions; not granted within %lld ms: "
                  "%d rlock, %d Redisson; queued in %.0f ms, first grant %.0f ms after the "
                  "release, served in %.0f ms\n",
                  pattern, holder == 'c' ? "an rlock" : "a Redisson", res.inversions,
                  (long long)wait_ms, res.not_granted_c, res.not_granted_j, res.queue_ms,
                  res.first_ms, res.span_ms);
    rlock_free(mine);
    return res;
}
