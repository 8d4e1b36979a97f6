/*
 * Mutual exclusion under load: 4 processes x 8 threads, one shared handle per process, all on
 * one lock name, 20,000 acquisitions in total (5,000 per process, 625 per thread).
 *
 * The checker is independent of the lock: inside each critical section a thread
 *   - sets a flag with SET flag 1 NX, which fails if anyone else is inside (a violation, counted
 *     on Redis with INCR so that every process' count is seen), and deletes it before unlocking;
 *   - increments a counter non-atomically (GET, then SET to the value + 1), which loses updates
 *     as soon as two critical sections overlap.
 * Passing means zero violations and a counter exactly equal to the number of acquisitions.
 *
 * Each thread talks to Redis for the checker over its own hiredis connection. The children are
 * forked before the parent creates any thread or client, and each child creates its own client.
 *
 * Measured on the 2-core test machine: about 9 s plain, 10.5 s under ASan+UBSan and 12.5 s under
 * ThreadSanitizer for the full 20,000, so no build scales the work down. The environment
 * variable RE_STRESS_TOTAL overrides the total (rounded down to a multiple of 32), for example
 * to run a longer soak by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "re_common.h"
#include "../common/mx_checker.h"

#define PROCS      4
#define THREADS    8
#define NAME       "re:stress:lock"
#define FLAG       "re:stress:flag"
#define COUNTER    "re:stress:counter"
#define VIOLATIONS "re:stress:violations"

/* Exit codes of a child. */
#define CHILD_OK    0
#define CHILD_ERROR 2

static rh_server *g_srv;
static int g_per_thread;

typedef struct {
    rlock *l;
    int errors;
    char err[160];
} worker;

/* One critical section's checks, by the shared independent checker. */
static int critical_section(redisContext *ctx)
{
    return mx_critical_section(ctx, FLAG, COUNTER, VIOLATIONS);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    redisContext *ctx = rh_connect(g_srv);
    if (ctx == NULL) {
        w->errors++;
        return NULL;
    }
    for (int i = 0; i < g_per_thread; i++) {
        int r = rlock_lock(w->l, -1);
        if (r != RLOCK_OK) {
            snprintf(w->err, sizeof(w->err), "lock: %s: %s", rlock_strerror(r), rlock_last_error());
            w->errors++;
            continue;
        }
        if (critical_section(ctx) != 0) {
            w->errors++;
        }
        r = rlock_unlock(w->l);
        if (r != RLOCK_OK) {
            snprintf(w->err, sizeof(w->err), "unlock: %s: %s", rlock_strerror(r),
                     rlock_last_error());
            w->errors++;
        }
    }
    redisFree(ctx);
    return NULL;
}

/* A child process: its own client, one handle shared by THREADS threads. */
static int child_main(void *arg)
{
    (void)arg;
    rlock_client *c = re_client(g_srv);
    if (c == NULL) {
        return CHILD_ERROR;
    }
    rlock *l = rlock_open(c, RLOCK_REENTRANT, NAME);
    if (l == NULL) {
        rlock_client_free(c);
        return CHILD_ERROR;
    }
    worker w[THREADS];
    pthread_t t[THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < THREADS; i++) {
        w[i].l = l;
        if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) {
            return CHILD_ERROR;
        }
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
        if (w[i].errors > 0) {
            fprintf(stderr, "child thread %d: %d errors, last: %s\n", i, w[i].errors, w[i].err);
        }
    }
    rlock_free(l);
    rlock_client_free(c);
    return errors == 0 ? CHILD_OK : CHILD_ERROR;
}

static void test_mutual_exclusion_4x8(void **state)
{
    (void)state;
    int total = 20000;
    const char *env = getenv("RE_STRESS_TOTAL");
    long requested = env != NULL ? strtol(env, NULL, 10) : 0;
    if (requested >= (long)PROCS * THREADS && requested <= 10000000) {
        total = (int)requested;
    }
    g_per_thread = total / (PROCS * THREADS);
    total = g_per_thread * PROCS * THREADS;

    g_srv = rh_start(NULL);
    assert_non_null(g_srv);
    int64_t t0 = rh_now_ms();
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        kids[i] = rh_fork_child(child_main, NULL);
        assert_true(kids[i] > 0);
    }
    int statuses[PROCS];
    for (int i = 0; i < PROCS; i++) {
        statuses[i] = rh_wait_child(kids[i], 120000);
    }
    int64_t took = rh_now_ms() - t0;

    const char *get_counter[] = {"GET", COUNTER, NULL};
    const char *get_violations[] = {"GET", VIOLATIONS, NULL};
    const char *exists[] = {"EXISTS", NAME, FLAG, NULL};
    long long counter = rh_cmd_int(g_srv, get_counter);
    char *viol = rh_cmd_str(g_srv, get_violations);
    long long violations = viol != NULL ? strtoll(viol, NULL, 10) : 0;
    free(viol);
    print_message("%d processes x %d threads: %d acquisitions in %lld ms (%.0f/s); counter %lld, "
                  "violations %lld\n",
                  PROCS, THREADS, total, (long long)took,
                  total * 1000.0 / (double)(took > 0 ? took : 1), counter, violations);
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(statuses[i], CHILD_OK);
    }
    assert_int_equal(violations, 0);
    assert_int_equal(counter, total);
    /* Every hold was released: neither the lock nor the checker's flag is left behind. No thread
     * re-enters, so every acquisition took the lock from free and drew exactly one token. */
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    char tk[128];
    re_token_key(NAME, tk, sizeof(tk));
    const char *get_token[] = {"GET", tk, NULL};
    long long tokens = rh_cmd_int(g_srv, get_token);
    assert_int_equal(tokens, total);
    assert_int_equal(re_wait_no_channels(g_srv, 1000), 0);
    rh_free(g_srv);
    g_srv = NULL;
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion_4x8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
