/*
 * Cancellation of lock waits (rlock_lock_ex with an rlock_cancel) on every lock type and both
 * groups, against a real server:
 *  - a fired token ends a new call before it sends any command;
 *  - a storm: 64 waiters on each subject, cancelled at random moments, all return
 *    RLOCK_ECANCELED, the p99 from firing to return is printed (and at most 10 ms without a
 *    sanitizer), and Redis is left with no queue entry and, once the holder unlocks, no hold;
 *  - cancels racing grants: the holder's unlock and the waiter's cancel at the same moment, many
 *    rounds, each judged by an independent look at Redis: a waiter that got RLOCK_OK holds the
 *    lock there, one that got RLOCK_ECANCELED holds nothing, and nothing stays held or queued.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "owners_util.h"
#include "tc_thread.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define WAITERS 64

static rh_server *g_srv;
static rlock_client *g_c;

/* The library's default pool (64, Redisson's): 64 waiters that attempt at once (the RedLock's
 * polls) each find a connection, as a user's would, instead of queueing for one of the harness'
 * 16 while their tokens fire. */
static void tune(rlock_options *o)
{
    o->pool_size = 64;
    ow_pool_size = 64;
}

TC_FIXTURE(g_srv, g_c, tune)

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int lock_as(rlock *l, rlock_owner *o, int64_t wait_ms, rlock_cancel *cancel)
{
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = o;
    a.wait_ms = wait_ms;
    a.cancel = cancel;
    return rlock_lock_ex(l, &a);
}

static long long int_cmd(const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key, NULL};
    return rh_cmd_int(g_srv, argv);
}

/* Entries left in every queue rlock or Redisson keeps for the lock name (and a group's members). */
static long long queued(const ow_subject *sj)
{
    long long n = 0;
    for (size_t i = 0; i < (sj->n == 0 ? 1 : sj->n); i++) {
        char name[96], key[160];
        snprintf(name, sizeof(name), sj->n == 0 ? "%s" : "%s:%zu", sj->name, i);
        snprintf(key, sizeof(key), "rlock_lock_waiters:{%s}", name);
        n += int_cmd("ZCARD", key);
        snprintf(key, sizeof(key), "redisson_lock_queue:{%s}", name);
        n += int_cmd("LLEN", key);
        snprintf(key, sizeof(key), "redisson_lock_timeout:{%s}", name);
        n += int_cmd("ZCARD", key);
        snprintf(key, sizeof(key), "rlock_rwlock_writers:{%s}", name);
        n += int_cmd("ZCARD", key);
    }
    return n;
}

static void test_fired_before_call(void **state)
{
    (void)state;
    rlock_client *quiet = tc_client_ex(g_srv, 0, 0, NULL, NULL);
    rlock_cancel *t = NULL;
    assert_int_equal(rlock_cancel_new(&t), RLOCK_OK);
    rlock_cancel_fire(t);
    for (int w = 0; w < OW_SUBJECTS; w++) {
        ow_subject sj;
        ow_open(&sj, w, quiet, g_srv, "fired", 0);
        const char *info[] = {"INFO", "stats", NULL};
        char *before = rh_cmd_str(g_srv, info);
        assert_int_equal(lock_as(sj.l, NULL, RLOCK_WAIT_FOREVER, t), RLOCK_ECANCELED);
        assert_int_equal(lock_as(sj.l, NULL, 0, t), RLOCK_ECANCELED);
        char *after = rh_cmd_str(g_srv, info);
        const char *tag = "total_commands_processed:";
        long long b = strtoll(strstr(before, tag) + strlen(tag), NULL, 10);
        long long a = strtoll(strstr(after, tag) + strlen(tag), NULL, 10);
        assert_int_equal(a - b, 1); /* the INFO itself, nothing from the cancelled calls */
        free(before);
        free(after);
        assert_int_equal(ow_any_key(&sj, g_srv), 0);
        ow_close(&sj);
    }
    rlock_cancel_free(t);
    rlock_client_free(quiet);
}

typedef struct waiter {
    rlock *l;
    rlock_owner *o;
    rlock_cancel *cancel;
    int rc;
    int64_t done_us;
    int64_t fired_us;
    pthread_t thread;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = lock_as(w->l, w->o, RLOCK_WAIT_FOREVER, w->cancel);
    w->done_us = now_us();
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Waits until the queue types show every waiter queued (the others: a fixed pause). */
static void wait_queued(const ow_subject *sj)
{
    rh_sleep_ms(300);
    int queues = sj->which == OW_REENTRANT || sj->which == OW_FAIR || sj->which == OW_WRITE;
    for (int i = 0; queues && i < 500 && queued(sj) < WAITERS; i++) {
        rh_sleep_ms(10);
    }
}

/* 64 waiters on one subject, cancelled in random order at random moments 0-2 ms apart; their
 * latencies (fire to return, us) go to lat. */
static void storm_one(int which, int64_t *lat)
{
    ow_subject sj;
    ow_open(&sj, which, g_c, g_srv, "storm", 0);
    rlock_owner *holder = NULL;
    assert_int_equal(rlock_owner_new(g_c, &holder), RLOCK_OK);
    assert_int_equal(lock_as(sj.rival, holder, 0, NULL), RLOCK_OK);
    static waiter w[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){.l = sj.l};
        assert_int_equal(rlock_owner_new(g_c, &w[i].o), RLOCK_OK);
        assert_int_equal(rlock_cancel_new(&w[i].cancel), RLOCK_OK);
        assert_int_equal(pthread_create(&w[i].thread, NULL, waiter_main, &w[i]), 0);
    }
    wait_queued(&sj);
    int order[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        order[i] = i;
    }
    for (int i = WAITERS - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < WAITERS; i++) {
        rh_sleep_ms(rand() % 3);
        w[order[i]].fired_us = now_us();
        rlock_cancel_fire(w[order[i]].cancel);
    }
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(w[i].thread, NULL);
        assert_int_equal(w[i].rc, RLOCK_ECANCELED);
        lat[i] = w[i].done_us - w[i].fired_us;
        assert_int_equal(rlock_is_held_by(sj.l, w[i].o), 0);
        rlock_cancel_free(w[i].cancel);
        rlock_owner_free(w[i].o);
    }
    assert_int_equal(queued(&sj), 0);
    assert_int_equal(rlock_is_held_by(sj.rival, holder), 1);
    assert_int_equal(rlock_unlock_ex(sj.rival, holder), RLOCK_OK);
    assert_int_equal(ow_any_key(&sj, g_srv), 0);
    rlock_owner_free(holder);
    ow_close(&sj);
}

static void test_storm(void **state)
{
    (void)state;
    static int64_t all[OW_SUBJECTS * WAITERS];
    for (int s = 0; s < OW_SUBJECTS; s++) {
        int64_t *lat = all + s * WAITERS;
        storm_one(s, lat);
        int64_t sorted[WAITERS];
        memcpy(sorted, lat, sizeof(sorted));
        qsort(sorted, WAITERS, sizeof(sorted[0]), cmp_i64);
        print_message("cancel storm %-9s: %d waiters, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                      ow_label(s), WAITERS, sorted[WAITERS / 2] / 1000.0,
                      sorted[WAITERS * 99 / 100] / 1000.0, sorted[WAITERS - 1] / 1000.0);
    }
    qsort(all, OW_SUBJECTS * WAITERS, sizeof(all[0]), cmp_i64);
    int64_t p99 = all[OW_SUBJECTS * WAITERS * 99 / 100];
    print_message("cancel storm, all %d waiters: p99 %.2f ms%s\n", OW_SUBJECTS * WAITERS,
                  p99 / 1000.0, SANITIZED ? " (sanitizer build: not asserted)" : "");
    if (!SANITIZED) {
        assert_true(p99 <= 10000);
    }
}

typedef struct racer {
    rlock *l;
    rlock_owner *o;
    rlock_cancel *cancel;
} racer;

static int race_wait(void *arg)
{
    racer *r = arg;
    return lock_as(r->l, r->o, RLOCK_WAIT_FOREVER, r->cancel);
}

/* The owner's hold count as Redis has it (HGET of its field), read without the library. */
static long long field_count(const ow_subject *sj, rlock_owner *o)
{
    char field[128];
    snprintf(field, sizeof(field), "%s%s", rlock_owner_id(o),
             sj->which == OW_WRITE ? ":write" : "");
    const char *argv[] = {"HGET", sj->name, field, NULL};
    char *v = rh_cmd_str(g_srv, argv);
    long long n = v != NULL ? strtoll(v, NULL, 10) : 0;
    free(v);
    return n;
}

/* One round: the waiter queues (or not yet), then the holder's unlock and the cancel happen in a
 * random order within microseconds. Returns 1 when the waiter got the lock, 0 when cancelled. */
static int race_round(const ow_subject *sj, rlock_owner *h, racer *r)
{
    assert_int_equal(lock_as(sj->l, h, 0, NULL), RLOCK_OK);
    assert_int_equal(rlock_cancel_new(&r->cancel), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, race_wait, r);
    struct timespec ts = {0, (long)(rand() % 600) * 1000L};
    nanosleep(&ts, NULL);
    if (rand() % 2) {
        assert_int_equal(rlock_unlock_ex(sj->l, h), RLOCK_OK);
        rlock_cancel_fire(r->cancel);
    } else {
        rlock_cancel_fire(r->cancel);
        assert_int_equal(rlock_unlock_ex(sj->l, h), RLOCK_OK);
    }
    int rc = tc_bg_join(&bg);
    rlock_cancel_free(r->cancel);
    if (rc == RLOCK_OK) {
        assert_int_equal(field_count(sj, r->o), 1); /* the grant is the caller's, on Redis */
        assert_int_equal(rlock_unlock_ex(sj->l, r->o), RLOCK_OK);
    } else {
        assert_int_equal(rc, RLOCK_ECANCELED);
        assert_int_equal(field_count(sj, r->o), 0); /* no hold the caller does not know of */
    }
    assert_int_equal(int_cmd("EXISTS", sj->name), 0); /* no grant lost: nobody holds it */
    assert_int_equal(queued(sj), 0);
    return rc == RLOCK_OK;
}

static void test_race(void **state)
{
    (void)state;
    const int subjects[] = {OW_REENTRANT, OW_FAIR, OW_WRITE};
    int rounds = SANITIZED ? 1000 : 10000;
    const char *env = getenv("RLOCK_RACE_ROUNDS");
    rounds = env != NULL ? atoi(env) : rounds;
    for (size_t k = 0; k < 3; k++) {
        ow_subject sj;
        ow_open(&sj, subjects[k], g_c, g_srv, "race", 0);
        rlock_owner *h = NULL;
        racer r = {.l = sj.l};
        assert_int_equal(rlock_owner_new(g_c, &h), RLOCK_OK);
        assert_int_equal(rlock_owner_new(g_c, &r.o), RLOCK_OK);
        int n = rounds / 3 + (k == 0 ? rounds % 3 : 0), got = 0;
        int64_t t0 = rh_now_ms();
        for (int i = 0; i < n; i++) {
            got += race_round(&sj, h, &r);
        }
        print_message("race %-9s: %d rounds in %lld ms, %d granted, %d cancelled\n",
                      ow_label(subjects[k]), n, (long long)(rh_now_ms() - t0), got, n - got);
        rlock_owner_free(h);
        rlock_owner_free(r.o);
        ow_close(&sj);
    }
}

/* --storm: the latency storm alone (ctest runs it serially, so that other tests' load does not
 * decide its p99); --race: the fired-token check and the race rounds. */
int main(int argc, char **argv)
{
    const struct CMUnitTest storm[] = {cmocka_unit_test(test_storm)};
    const struct CMUnitTest race[] = {cmocka_unit_test(test_fired_before_call),
                                      cmocka_unit_test(test_race)};
    if (argc > 1 && strcmp(argv[1], "--storm") == 0) {
        return cmocka_run_group_tests(storm, setup, teardown);
    }
    if (argc > 1 && strcmp(argv[1], "--race") == 0) {
        return cmocka_run_group_tests(race, setup, teardown);
    }
    return cmocka_run_group_tests(storm, setup, teardown) +
           cmocka_run_group_tests(race, setup, teardown);
}
