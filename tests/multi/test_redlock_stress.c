/*
 * RedLock mutual exclusion across processes: 3 processes x 4 threads share one RedLock over 3
 * servers (each process has its own 3 clients; the 4 threads of a process share one group
 * handle) for 3,000 acquisitions in all (half under ThreadSanitizer). Inside every section
 * a checker on a fourth server (never touched by faults) takes a SET NX flag and bumps a
 * non-atomic GET/SET counter, so an overlap shows as a violation or a lost update.
 *
 * Mid-run one lock server is killed and, following the restart-delay rule of redis.io, restarted
 * empty only after the longest lease has passed; the run must go on (2 of 3 is a majority) with
 * zero violations and an exact counter.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "multi_util.h"

#define PROCS    3
#define THREADS  4
#define LEASE_MS 1000
#define KEY      "rlstress"

typedef struct cworker {
    rlock *g;
    redisContext *chk;
    int iters, violations, errors, retries, late, unconfirmed;
} cworker;

static void *cworker_main(void *arg)
{
    cworker *w = arg;
    for (int i = 0; i < w->iters; i++) {
        int rc = rlock_try_lock(w->g, 20000, LEASE_MS);
        if (rc != RLOCK_OK) {
            fprintf(stderr, "try_lock: %d %s\n", rc, rlock_last_error());
            w->retries++;
            i--;
            if (w->retries > 100000) {
                w->errors++;
                return NULL;
            }
            continue;
        }
        int v = mu_check_enter(w->chk, KEY);
        mu_sleep_ms(1); /* some work, so that the run spans the server's downtime */
        w->violations += v > 0;
        w->errors += v < 0;
        w->errors += mu_check_leave(w->chk, KEY) < 0;
        rc = rlock_unlock(w->g);
        w->late += rc == RLOCK_ELOST; /* the section outlived its validity */
        /* RLOCK_ECONN: the killed server was one of a bare majority, so fewer than a majority
         * could confirm the release (the hold expires with its lease); not a test error. */
        w->unconfirmed += rc == RLOCK_ECONN;
        if (rc != RLOCK_OK && rc != RLOCK_ELOST && rc != RLOCK_ECONN) {
            fprintf(stderr, "unlock: %d %s\n", rc, rlock_last_error());
            w->errors++;
        }
    }
    return NULL;
}

/* Child: argv = --child url0 url1 url2 checker_url iters_per_thread. Exit 0 clean, 1 violation,
 * 2 error. Prints its counts on stdout. */
static int child_main(char **argv)
{
    rlock_client *c[3];
    rlock *m[3];
    for (int i = 0; i < 3; i++) {
        c[i] = mu_client(argv[2 + i], 0, 50);
        if (c[i] == NULL) {
            return 2;
        }
        m[i] = rlock_open(c[i], RLOCK_REENTRANT, KEY);
    }
    rlock *g = rlock_redlock_new(m, 3);
    if (g == NULL) {
        return 2;
    }
    int port = atoi(strrchr(argv[5], ':') + 1);
    cworker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (cworker){g, redisConnect("127.0.0.1", port), atoi(argv[6]), 0, 0, 0, 0, 0};
        if (w[i].chk == NULL || w[i].chk->err) {
            return 2;
        }
        pthread_create(&t[i], NULL, cworker_main, &w[i]);
    }
    int violations = 0, errors = 0, retries = 0, late = 0, unconfirmed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        violations += w[i].violations;
        errors += w[i].errors;
        retries += w[i].retries;
        late += w[i].late;
        unconfirmed += w[i].unconfirmed;
        redisFree(w[i].chk);
    }
    printf("child %d: violations %d errors %d failed-tries %d late-unlocks %d unconfirmed-unlocks "
           "%d\n",
           (int)getpid(), violations, errors, retries, late, unconfirmed);
    fflush(stdout);
    rlock_free(g);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
        rlock_client_free(c[i]);
    }
    return violations ? 1 : errors ? 2 : 0;
}

static void test_mutual_exclusion_with_restart(void **state)
{
    (void)state;
    rh_server *s[3], *checker = rh_start(NULL);
    assert_non_null(checker);
    for (int i = 0; i < 3; i++) {
        s[i] = rh_start(NULL);
        assert_non_null(s[i]);
    }
    int per_thread = (int)(3000 * mu_scale()) / (PROCS * THREADS);
    char iters[16];
    snprintf(iters, sizeof(iters), "%d", per_thread);
    pid_t pid[PROCS];
    int64_t t0 = rh_now_ms();
    for (int p = 0; p < PROCS; p++) {
        const char *argv[] = {"x",          "--child",       rh_url(s[0]), rh_url(s[1]),
                              rh_url(s[2]), rh_url(checker), iters,        NULL};
        pid[p] = rh_spawn_self(argv);
        assert_true(pid[p] > 0);
    }
    /* Fault after a quarter of the run: kill server 1, keep it out for the longest lease (the
     * restart-delay rule), bring it back empty. */
    redisContext *chk = rh_connect(checker);
    assert_non_null(chk);
    long long total = (long long)per_thread * PROCS * THREADS;
    while (mu_counter(chk, KEY) < total / 4 && rh_now_ms() - t0 < 60000) {
        mu_sleep_ms(5);
    }
    long long at_kill = mu_counter(chk, KEY);
    assert_int_equal(rh_stop(s[1]), 0);
    mu_sleep_ms(LEASE_MS + 50);
    long long while_down = mu_counter(chk, KEY) - at_kill;
    assert_int_equal(rh_restart(s[1]), 0);
    long long at_restart = mu_counter(chk, KEY);
    for (int p = 0; p < PROCS; p++) {
        assert_int_equal(rh_wait_child(pid[p], 100000), 0);
    }
    int64_t took = rh_now_ms() - t0;
    long long final = mu_counter(chk, KEY);
    printf("redlock stress: %d processes x %d threads, %lld sections in %lld ms (%lld while a "
           "server was down), counter %lld\n",
           PROCS, THREADS, total, (long long)took, while_down, final);
    assert_int_equal(final, total);
    assert_true(while_down > 0);     /* the majority of 2 kept working */
    assert_true(at_restart < total); /* and the restarted server served the rest */
    redisFree(chk);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mu_exists(s[i], KEY), 0);
        rh_free(s[i]);
    }
    rh_free(checker);
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0) {
        return child_main(argv);
    }
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mutual_exclusion_with_restart)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
