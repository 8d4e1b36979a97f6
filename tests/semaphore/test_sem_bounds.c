/*
 * The documented bounds of semaphore permits and latch counts (include/rlock.h): every value a
 * call takes is within 2^31-1 (RLOCK_EINVAL beyond, with the range in the message, and nothing
 * written to Redis), while the count on Redis may grow past it through adds and releases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "tc_redis.h"

#define MAX31 INT64_C(2147483647)

static rh_server *srv;
static rlock_client *client;
TC_FIXTURE(srv, client, NULL)

/* r is RLOCK_EINVAL and the message names the upper bound. */
static void assert_out_of_range(int r)
{
    assert_int_equal(r, RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "2147483647"));
}

static void test_semaphore_bounds(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(client, "bounds:sem");
    assert_non_null(s);
    assert_out_of_range(rlock_semaphore_try_set_permits(s, -1));
    assert_out_of_range(rlock_semaphore_try_set_permits(s, MAX31 + 1));
    assert_out_of_range(rlock_semaphore_try_set_permits(s, INT64_MAX));
    assert_int_equal(rlock_semaphore_available(s), 0); /* nothing was written */
    assert_int_equal(rlock_semaphore_try_set_permits(s, MAX31), 1);

    assert_out_of_range(rlock_semaphore_add_permits(s, 0));
    assert_out_of_range(rlock_semaphore_add_permits(s, MAX31 + 1));
    assert_out_of_range(rlock_semaphore_add_permits(s, -MAX31 - 1));
    assert_int_equal(rlock_semaphore_available(s), MAX31);
    /* The count itself may pass 2^31-1. */
    assert_int_equal(rlock_semaphore_add_permits(s, MAX31), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2 * MAX31);

    assert_out_of_range(rlock_semaphore_acquire(s, 0, 0));
    assert_out_of_range(rlock_semaphore_acquire(s, MAX31 + 1, 0));
    assert_out_of_range(rlock_semaphore_release(s, 0));
    assert_out_of_range(rlock_semaphore_release(s, MAX31 + 1));
    assert_int_equal(rlock_semaphore_available(s), 2 * MAX31);
    assert_int_equal(rlock_semaphore_acquire(s, MAX31, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), MAX31);
    assert_int_equal(rlock_semaphore_release(s, MAX31), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2 * MAX31);
    rlock_semaphore_free(s);
}

static void test_latch_bounds(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(client, "bounds:latch");
    assert_non_null(l);
    assert_out_of_range(rlock_latch_try_set_count(l, 0));
    assert_out_of_range(rlock_latch_try_set_count(l, -1));
    assert_out_of_range(rlock_latch_try_set_count(l, MAX31 + 1));
    assert_out_of_range(rlock_latch_try_set_count(l, INT64_MAX));
    assert_int_equal(rlock_latch_count(l), 0); /* nothing was written */
    assert_int_equal(rlock_latch_try_set_count(l, MAX31), 1);
    assert_int_equal(rlock_latch_count(l), MAX31);
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    assert_int_equal(rlock_latch_count(l), MAX31 - 1);
    rlock_latch_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semaphore_bounds),
        cmocka_unit_test(test_latch_bounds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
