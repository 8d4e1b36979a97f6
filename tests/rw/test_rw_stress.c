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

/* The clients of the run: a 3 s watchdog lease, so that renewals run during it. */
static void tune(rlock_options *o)
{
    o->pool_size = 32;
    o->watchdog_timeout_ms = 3000;
}

static int read_step(tc_worker *w, long i)
{
    rlock *rd = ((tc_proc *)w->proc_ctx)->h[0];
    int rc = rlock_try_lock(rd, 2000, (i % 2) ? -1 : 5000);
    if (rc == RLOCK_ETIMEDOUT) {
        return TC_STEP_RETRY;
    }
    if (rc != RLOCK_OK) {
        return tc_step_fail(w, "read lock", rc);
    }
    int errors = 0;
    if (i % 7 == 0) {
        errors += rlock_try_lock(rd, 0, -1) != RLOCK_OK;
        errors += rlock_unlock(rd) != RLOCK_OK;
    }
    tc_mx_read_enter(w->mx, 0);
    usleep((useconds_t)(rand_r(&w->seed) % 2000));
    tc_mx_read_leave(w->mx, 0);
    errors += rlock_unlock(rd) != RLOCK_OK;
    return errors == 0 ? TC_STEP_OK : tc_step_fail(w, "read re-entry or unlock", RLOCK_OK);
}

static int write_step(tc_worker *w, long i)
{
    rlock *rd = ((tc_proc *)w->proc_ctx)->h[0], *wr = ((tc_proc *)w->proc_ctx)->h[1];
    int rc = rlock_try_lock(wr, 5000, -1);
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
        errors += rlock_lock(rd, -1) != RLOCK_OK;
        tc_mx_leave(w->mx, 0);
        tc_mx_read_enter(w->mx, 0);
        errors += rlock_unlock(wr) != RLOCK_OK;
        usleep(1000);
        tc_mx_read_leave(w->mx, 0);
        errors += rlock_unlock(rd) != RLOCK_OK;
    } else {
        tc_mx_leave(w->mx, 0);
        errors += rlock_unlock(wr) != RLOCK_OK;
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
    tc_handles hs = {.srv = srv,
                     .tune = tune,
                     .n = 2,
                     .type = {RLOCK_READ, RLOCK_WRITE},
                     .name = {LOCK_NAME, LOCK_NAME}};
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = READERS_PER_PROC + 1,
                           .duration_ms = duration,
                           .timeout_ms = duration + 30000,
                           .step = step};
    tc_stress_report r;
    tc_stress_run_handles(&spec, &hs, &r);
    long reads = r.reads[0], writes = r.entries[0];
    print_message("%ld reads, %ld writes, counter %ld, max concurrent readers %ld, "
                  "timeouts %ld, errors %ld, violations %ld\n",
                  reads, writes, r.counter[0], r.max_readers[0], r.res.retries, r.res.errors,
                  r.violations);
    tc_assert_clean(&r); /* counter == writes among the rest */
    assert_true(writes > 0);
    assert_true(reads > writes);
    assert_true(r.max_readers[0] > 1);
    assert_int_equal(rw_exists(srv, LOCK_NAME), 0);
    assert_int_equal(rw_exists(srv, "rlock_rwlock_writers:{" LOCK_NAME "}"), 0);
}

TC_MAIN(NULL, NULL,
        cmocka_unit_test_setup_teardown(test_rw_invariants, tc_server_setup, tc_server_teardown))
