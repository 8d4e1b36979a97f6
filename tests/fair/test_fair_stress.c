/*
 * Mutual exclusion of the fair lock under load: 4 processes x 6 threads, one shared handle per
 * process, all on one lock name; 4,800 acquisitions in total (200 per thread; 2,400 = 100 per
 * thread under ThreadSanitizer, which is several times slower; FAIR_STRESS_TOTAL overrides).
 * Every release hands the lock to the first waiter in the queue, so this also drives the queue
 * through thousands of joins, grants and per-waiter notifications.
 *
 * The checker is independent of the lock: inside each critical section a thread
 *   - sets a flag with SET flag 1 NX, which fails if anyone else is inside (a violation, counted
 *     on Redis with INCR so that every process' count is seen), and deletes it before unlocking;
 *   - increments a counter non-atomically (GET, then SET to the value + 1), which loses updates
 *     as soon as two critical sections overlap.
 * Passing means zero violations, a counter exactly equal to the number of acquisitions, one
 * fencing token per acquisition, and an empty queue and zset at the end.
 *
 * Each thread talks to Redis for the checker over its own hiredis connection. The children are
 * forked before the parent creates any thread or client, and each child creates its own client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "../common/mx_checker.h"

#define PROCS      4
#define THREADS    6
#define NAME       "fair:stress:lock"
#define FLAG       "fair:stress:flag"
#define COUNTER    "fair:stress:counter"
#define VIOLATIONS "fair:stress:violations"

static rh_server *g_srv;
static int g_per_thread;

typedef struct worker {
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
        /* Alternate watchdog holds and leased holds: both paths of the grant. */
        int r = rlock_lock(w->l, i % 2 ? 10000 : -1);
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

static int child_main(void *arg)
{
    (void)arg;
    rlock_client *c = fc_client(g_srv, 0);
    if (c == NULL) {
        return 2;
    }
    rlock *l = rlock_open(c, RLOCK_FAIR, NAME);
    if (l == NULL) {
        rlock_client_free(c);
        return 2;
    }
    worker w[THREADS];
    pthread_t t[THREADS];
    memset(w, 0, sizeof(w));
    int started = 0;
    for (; started < THREADS; started++) {
        w[started].l = l;
        if (pthread_create(&t[started], NULL, worker_main, &w[started]) != 0) {
            break;
        }
    }
    int errors = started == THREADS ? 0 : 1;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
        if (w[i].errors > 0) {
            fprintf(stderr, "child thread %d: %d errors, last: %s\n", i, w[i].errors, w[i].err);
        }
    }
    rlock_free(l);
    rlock_client_free(c);
    return errors == 0 ? 0 : 2;
}

static void test_mutual_exclusion(void **state)
{
    (void)state;
    int total = FC_TSAN ? 2400 : 4800;
    const char *env = getenv("FAIR_STRESS_TOTAL");
    if (env != NULL && atoi(env) >= PROCS * THREADS) {
        total = atoi(env);
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
    const char *get_token[] = {"GET", "redisson_lock_token:{" NAME "}", NULL};
    long long counter = rh_cmd_int(g_srv, get_counter);
    char *viol = rh_cmd_str(g_srv, get_violations);
    long long violations = viol != NULL ? atoll(viol) : 0;
    free(viol);
    print_message("%d processes x %d threads: %d fair acquisitions in %lld ms (%.0f/s); "
                  "counter %lld, violations %lld\n",
                  PROCS, THREADS, total, (long long)took,
                  total * 1000.0 / (double)(took > 0 ? took : 1), counter, violations);
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(statuses[i], 0);
    }
    assert_int_equal(violations, 0);
    assert_int_equal(counter, total);
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    assert_int_equal(rh_cmd_int(g_srv, get_token), total);
    assert_int_equal(fc_llen(g_srv, NAME), 0);
    assert_int_equal(fc_zcard(g_srv, NAME), 0);
    rh_free(g_srv);
    g_srv = NULL;
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutual_exclusion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
