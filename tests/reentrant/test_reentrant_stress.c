/*
 * Mutual exclusion under load: 4 processes x 8 threads, one shared handle per process, all on
 * one lock name, 20,000 acquisitions in total (5,000 per process, 625 per thread; watchdog and
 * leased holds alternate), run by the shared stress driver (tests/common/tc_stress.h).
 *
 * The checker (tests/common/tc_checker.h) is independent of the lock and of Redis: shared memory
 * that every process sees. Inside each critical section a thread marks itself inside (finding
 * anyone else there is a violation) and bumps a counter non-atomically, which loses updates as
 * soon as two sections overlap. Passing means zero violations, a counter exactly equal to the
 * number of acquisitions, one fencing token per acquisition and nothing left in Redis.
 *
 * The environment variable RE_STRESS_TOTAL overrides the total (rounded down to a multiple of
 * 32), for example to run a longer soak by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "re_common.h"
#include "tc_stress.h"

#define PROCS   4
#define THREADS 8
#define NAME    "re:stress:lock"

static void test_mutual_exclusion_4x8(void **state)
{
    rh_server *srv = *state;
    long total = 20000;
    const char *env = getenv("RE_STRESS_TOTAL");
    long requested = env != NULL ? strtol(env, NULL, 10) : 0;
    if (requested >= (long)PROCS * THREADS && requested <= 10000000) {
        total = requested;
    }
    total = tc_stress_exclusive(srv, RLOCK_REENTRANT, NAME, PROCS, THREADS, total);
    /* Every hold was released. No thread re-enters, so every acquisition took the lock from free
     * and drew exactly one token. */
    const char *exists[] = {"EXISTS", NAME, NULL};
    assert_int_equal(rh_cmd_int(srv, exists), 0);
    char tk[128];
    re_token_key(NAME, tk, sizeof(tk));
    const char *get_token[] = {"GET", tk, NULL};
    assert_int_equal(rh_cmd_int(srv, get_token), total);
    assert_int_equal(re_wait_no_channels(srv, 1000), 0);
}

TC_MAIN(NULL, NULL,
        cmocka_unit_test_setup_teardown(test_mutual_exclusion_4x8, tc_server_setup,
                                        tc_server_teardown))
