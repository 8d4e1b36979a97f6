/*
 * Read-write lock invariants under stress (real redis-server): 3 processes, each with 4 reader
 * threads and 1 writer thread, for 20 s (RLOCK_RW_STRESS_MS overrides), run by the shared stress
 * driver (tests/common/tc_stress.h). The checker (tests/common/tc_checker.h) lives in memory
 * shared by the processes, independent of the lock and of Redis:
 *  - a reader's entry counts the readers inside (whose maximum is recorded) and finds no writer
 *    inside;
 *  - a writer's entry finds nobody inside, readers or writer, and bumps a counter non-atomically
 *    (lost updates = broken exclusion); the writer then holds for another 0.5 ms;
 *  - one write in four downgrades: takes the read side inside the write lock, leaves the writer's
 *    section, enters as a reader and only then releases the write side; one read in seven
 *    re-enters (which must pass waiting writers).
 * Afterwards: no violation, no unexpected error, counter == number of writes, and readers did
 * overlap (maximum concurrent readers > 1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rw_util.h"
#include "tc_redis.h"
#include "tc_stress.h"

#define PROCS            3
#define READERS_PER_PROC 4
#define LOCK_NAME        "rw:stress"

typedef struct proc_ctx {
    rlock_client *c;
    rlock *r, *w; /* shared by the process' threads */
} proc_ctx;

static void *proc_init(int proc, void *arg)
{
    (void)proc;
    proc_ctx *p = calloc(1, sizeof(*p));
    p->c = rw_client(arg, 3000, 0, 0);
    p->r = p->c != NULL ? rlock_open(p->c, RLOCK_READ, LOCK_NAME) : NULL;
    p->w = p->c != NULL ? rlock_open(p->c, RLOCK_WRITE, LOCK_NAME) : NULL;
    if (p->r == NULL || p->w == NULL) {
        rlock_free(p->r);
        rlock_free(p->w);
        rlock_client_free(p->c);
        free(p);
        return NULL;
    }
    return p;
}

static void proc_fini(void *ctx)
{
    proc_ctx *p = ctx;
    rlock_free(p->r);
    rlock_free(p->w);
    rlock_client_free(p->c);
    free(p);
}

static int read_step(tc_worker *w, long i)
{
    proc_ctx *p = w->proc_ctx;
    int rc = rlock_try_lock(p->r, 2000, (i % 2) ? -1 : 5000);
    if (rc == RLOCK_ETIMEDOUT) {
        return TC_STEP_RETRY;
    }
    if (rc != RLOCK_OK) {
        return tc_step_fail(w, "read lock", rc);
    }
    int errors = 0;
    if (i % 7 == 0) {
        errors += rlock_try_lock(p->r, 0, -1) != RLOCK_OK;
        errors += rlock_unlock(p->r) != RLOCK_OK;
    }
    tc_mx_read_enter(w->mx, 0);
    usleep((useconds_t)(rand_r(&w->seed) % 2000));
    tc_mx_read_leave(w->mx, 0);
    errors += rlock_unlock(p->r) != RLOCK_OK;
    return errors == 0 ? TC_STEP_OK : tc_step_fail(w, "read re-entry or unlock", RLOCK_OK);
}

static int write_step(tc_worker *w, long i)
{
    proc_ctx *p = w->proc_ctx;
    int rc = rlock_try_lock(p->w, 5000, -1);
    if (rc == RLOCK_ETIMEDOUT) {
        return TC_STEP_RETRY;
    }
    if (rc != RLOCK_OK) {
        return tc_step_fail(w, "write lock", rc);
    }
    int errors = 0;
    tc_mx_enter(w->mx, 0);
    usleep(500);
    if (i % 4 == 0) {
        /* Downgrade: read inside the write lock, then let the write side go. */
        errors += rlock_lock(p->r, -1) != RLOCK_OK;
        tc_mx_leave(w->mx, 0);
        tc_mx_read_enter(w->mx, 0);
        errors += rlock_unlock(p->w) != RLOCK_OK;
        usleep(1000);
        tc_mx_read_leave(w->mx, 0);
        errors += rlock_unlock(p->r) != RLOCK_OK;
    } else {
        tc_mx_leave(w->mx, 0);
        errors += rlock_unlock(p->w) != RLOCK_OK;
    }
    usleep(10000);
    return errors == 0 ? TC_STEP_OK : tc_step_fail(w, "downgrade or write unlock", RLOCK_OK);
}

/* Threads 0 .. READERS_PER_PROC-1 of a process read; the last one writes. */
static int step(tc_worker *w, long i)
{
    return w->thread < READERS_PER_PROC ? read_step(w, i) : write_step(w, i);
}

static void test_rw_invariants(void **state)
{
    rh_server *srv = *state;
    const char *env = getenv("RLOCK_RW_STRESS_MS");
    int64_t duration = env != NULL ? atoll(env) : 20000;
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = READERS_PER_PROC + 1,
                           .duration_ms = duration,
                           .timeout_ms = duration + 30000,
                           .proc_init = proc_init,
                           .proc_fini = proc_fini,
                           .step = step,
                           .arg = srv};
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_stress_result res;
    tc_stress_wait(st, &res);
    tc_mx *mx = tc_stress_mx(st);
    long reads = tc_mx_reads(mx, 0), writes = tc_mx_entries(mx, 0);
    long counter = tc_mx_counter(mx, 0), maxr = tc_mx_max_readers(mx, 0);
    long violations = tc_mx_violations(mx);
    tc_stress_free(st);
    print_message("%ld reads, %ld writes, counter %ld, max concurrent readers %ld, "
                  "timeouts %ld, errors %ld, violations %ld\n",
                  reads, writes, counter, maxr, res.retries, res.errors, violations);
    assert_int_equal(res.failed_procs, 0);
    assert_int_equal(violations, 0);
    assert_int_equal(res.errors, 0);
    assert_true(writes > 0);
    assert_true(reads > writes);
    assert_int_equal(counter, writes);
    assert_true(maxr > 1);
    assert_int_equal(rw_exists(srv, LOCK_NAME), 0);
    assert_int_equal(rw_exists(srv, "rlock_rwlock_writers:{" LOCK_NAME "}"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rw_invariants, tc_server_setup, tc_server_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
