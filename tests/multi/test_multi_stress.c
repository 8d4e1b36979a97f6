/*
 * No deadlock, no livelock, no violation: 8 threads take random overlapping groups of 2-4 of 6
 * lock names, in random member order, 2,000 acquisitions each (half under ThreadSanitizer,
 * or RLOCK_STRESS_SCALE percent), with lock() (no wait limit) so that a deadlock would hang the
 * run (ctest's TIMEOUT then fails it). Inside each section every member name goes through the
 * Redis-side checker (SET NX flag + non-atomic counter); at the end every name's counter must
 * equal the number of sections that included it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "multi_util.h"

#define NAMES   6
#define THREADS 8

static rh_server *srv;
static rlock_client *cli[2];
static rlock *locks[2][NAMES]; /* the same 6 names through two clients */
static const char *names[NAMES] = {"s0", "s1", "s2", "s3", "s4", "s5"};

typedef struct worker {
    int id, iters;
    long long uses[NAMES];
    int violations, errors;
    unsigned seed;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    redisContext *chk = rh_connect(srv);
    if (chk == NULL) {
        w->errors++;
        return NULL;
    }
    rlock *const *mine = locks[w->id % 2];
    for (int it = 0; it < w->iters; it++) {
        int order[NAMES] = {0, 1, 2, 3, 4, 5};
        for (int i = NAMES - 1; i > 0; i--) { /* Fisher-Yates: random subset in random order */
            int j = rand_r(&w->seed) % (i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        size_t k = 2 + (size_t)(rand_r(&w->seed) % 3);
        rlock *m[4];
        for (size_t i = 0; i < k; i++) {
            m[i] = mine[order[i]];
        }
        rlock *g = rlock_multi_new(m, k);
        if (g == NULL || rlock_lock(g, 30000) != RLOCK_OK) {
            w->errors++;
            rlock_free(g);
            continue;
        }
        for (size_t i = 0; i < k; i++) {
            int v = mu_check_enter(chk, names[order[i]]);
            w->violations += v > 0;
            w->errors += v < 0;
            w->uses[order[i]]++;
        }
        for (size_t i = 0; i < k; i++) {
            w->errors += mu_check_leave(chk, names[order[i]]) < 0;
        }
        if (rlock_unlock(g) != RLOCK_OK) {
            w->errors++;
        }
        rlock_free(g);
    }
    redisFree(chk);
    return NULL;
}

static void test_no_deadlock(void **state)
{
    (void)state;
    int iters = (int)(2000 * mu_scale());
    worker w[THREADS] = {0};
    pthread_t t[THREADS];
    int64_t t0 = rh_now_ms();
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].iters = iters;
        w[i].seed = (unsigned)(i * 7919 + (int)rh_now_ms());
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    long long uses[NAMES] = {0};
    int violations = 0, errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        violations += w[i].violations;
        errors += w[i].errors;
        for (int n = 0; n < NAMES; n++) {
            uses[n] += w[i].uses[n];
        }
    }
    int64_t took = rh_now_ms() - t0;
    redisContext *chk = rh_connect(srv);
    assert_non_null(chk);
    long long total = 0;
    for (int n = 0; n < NAMES; n++) {
        assert_int_equal(mu_counter(chk, names[n]), uses[n]);
        assert_int_equal(mu_exists(srv, names[n]), 0);
        total += uses[n];
    }
    redisFree(chk);
    printf("multi stress: %d threads x %d group acquisitions (%lld member sections) in %lld ms, "
           "%d violations, %d errors\n",
           THREADS, iters, total, (long long)took, violations, errors);
    assert_int_equal(violations, 0);
    assert_int_equal(errors, 0);
}

typedef struct bare {
    int violations;
} bare;

static void *bare_main(void *arg)
{
    bare *b = arg;
    redisContext *chk = rh_connect(srv);
    for (int i = 0; chk != NULL && i < 50; i++) {
        b->violations += mu_check_enter(chk, "bare") > 0;
        mu_sleep_ms(1);
        mu_check_leave(chk, "bare");
    }
    redisFree(chk);
    return NULL;
}

/* Control: the checker does see overlapping sections when no lock is taken, so the zero of the
 * real run means something. */
static void test_checker_sees_overlap(void **state)
{
    (void)state;
    bare b[4] = {{0}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, bare_main, &b[i]);
    }
    int violations = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        violations += b[i].violations;
    }
    assert_true(violations > 0);
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    srv = rh_start(NULL);
    if (srv == NULL) {
        return -1;
    }
    for (int c = 0; c < 2; c++) {
        cli[c] = mu_client(rh_url(srv), 0, 0);
        if (cli[c] == NULL) {
            return -1;
        }
        for (int n = 0; n < NAMES; n++) {
            locks[c][n] = rlock_open(cli[c], RLOCK_REENTRANT, names[n]);
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        for (int n = 0; n < NAMES; n++) {
            rlock_free(locks[c][n]);
        }
        rlock_client_free(cli[c]);
    }
    rh_free(srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_checker_sees_overlap),
                                       cmocka_unit_test(test_no_deadlock)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
