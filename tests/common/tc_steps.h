/*
 * A scenario on one lock handle written as a table: each step a call and the result it must give,
 * so that a test of the API's states (hold counts, is_locked, is_held, force unlock) reads as the
 * sequence it checks instead of a column of assertions. Part of the rlock_testcommon library.
 */
#ifndef RLOCK_TESTS_TC_STEPS_H
#define RLOCK_TESTS_TC_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "rlock.h"

typedef enum tc_call {
    TC_LOCK,         /* rlock_lock(l, a) */
    TC_TRY,          /* rlock_try_lock(l, a, b) */
    TC_UNLOCK,       /* rlock_unlock(l) */
    TC_IS_LOCKED,    /* rlock_is_locked(l) */
    TC_IS_HELD,      /* rlock_is_held(l) */
    TC_HOLD_COUNT,   /* rlock_hold_count(l) */
    TC_FORCE_UNLOCK, /* rlock_force_unlock(l) */
    TC_OTHER,        /* the suite's call a on another thread (tc_run_steps()' other) */
} tc_call;

typedef struct tc_step {
    tc_call call;
    int64_t a, b;
    long long want;
} tc_step;

/* The step's call on l on this thread (TC_OTHER excepted), its result as a number. */
long long tc_step_call(rlock *l, tc_call call, int64_t a, int64_t b);

/* Runs the n steps on l in order and fails the running test at the first whose result is not
 * its want, naming the step. other (NULL when no step is TC_OTHER) runs a TC_OTHER step: another
 * thread's call number a on l. */
void tc_run_steps(rlock *l, const tc_step *steps, size_t n, long long (*other)(rlock *l, int a));

/* Redisson's scenarios that every reentrant lock type passes (RedissonLockTest and
 * RedissonFairLockTest): testReentrancy up to the last release (two try_lock(0) holds; another
 * thread's TC_TRY (try_lock(0), under the watchdog) fails until both are released), and
 * testGetHoldCount's way up (0, 1, 0, 1, 2) and down (1, 0) from a count of 2. */
extern const tc_step tc_steps_reentrancy[6];
extern const tc_step tc_steps_count_up[9];
extern const tc_step tc_steps_count_down[4];

#define TC_STEPS(l, steps, other)                                                                  \
    tc_run_steps((l), (steps), sizeof(steps) / sizeof((steps)[0]), (other))

#endif
