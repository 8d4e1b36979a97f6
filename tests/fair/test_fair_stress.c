/*
 * Mutual exclusion of the fair lock under load: 4 processes x 6 threads, one shared handle per
 * process, all on one lock name; 4,800 acquisitions in total (200 per thread; 2,400 = 100 per
 * thread under ThreadSanitizer, which is several times slower; FAIR_STRESS_TOTAL overrides;
 * watchdog and leased holds alternate), run by the shared stress driver
 * (tests/common/tc_stress.h). Every release hands the lock to the first waiter in the queue, so
 * this also drives the queue through thousands of joins, grants and per-waiter notifications.
 *
 * The checker (tests/common/tc_checker.h) is independent of the lock and of Redis: shared memory
 * that every process sees. Inside each critical section a thread marks itself inside (finding
 * anyone else there is a violation) and bumps a counter non-atomically, which loses updates as
 * soon as two sections overlap. Passing means zero violations, a counter exactly equal to the
 * number of acquisitions, one fencing token per acquisition, and an empty queue and zset at the
 * end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "tc_stress.h"

#define PROCS   4
#define THREADS 6
#define NAME    "fair:stress:lock"

static void test_mutual_exclusion(void **state)
{
    rh_server *srv = *state;
    long total = TC_TSAN ? 2400 : 4800;
    const char *env = getenv("FAIR_STRESS_TOTAL");
    if (env != NULL && atol(env) >= PROCS * THREADS) {
        total = atol(env);
    }
    total = tc_stress_exclusive(srv, RLOCK_FAIR, NAME, PROCS, THREADS, total);
    const char *exists[] = {"EXISTS", NAME, NULL};
    const char *get_token[] = {"GET", "redisson_lock_token:{" NAME "}", NULL};
    assert_int_equal(rh_cmd_int(srv, exists), 0);
    assert_int_equal(rh_cmd_int(srv, get_token), total);
    assert_int_equal(fc_llen(srv, NAME), 0);
    assert_int_equal(fc_zcard(srv, NAME), 0);
}

TC_MAIN(NULL, NULL,
        cmocka_unit_test_setup_teardown(test_mutual_exclusion, tc_server_setup, tc_server_teardown))
