#include "tc_steps.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

const tc_step tc_steps_reentrancy[6] = {
    {TC_TRY, 0, -1, RLOCK_OK},
    {TC_TRY, 0, -1, RLOCK_OK},
    {TC_OTHER, TC_TRY, 0, RLOCK_ETIMEDOUT},
    {TC_UNLOCK, 0, 0, RLOCK_OK},
    {TC_OTHER, TC_TRY, 0, RLOCK_ETIMEDOUT},
    {TC_UNLOCK, 0, 0, RLOCK_OK},
};

const tc_step tc_steps_count_up[9] = {
    {TC_HOLD_COUNT, 0, 0, 0},    {TC_LOCK, -1, 0, RLOCK_OK}, {TC_HOLD_COUNT, 0, 0, 1},
    {TC_UNLOCK, 0, 0, RLOCK_OK}, {TC_HOLD_COUNT, 0, 0, 0},   {TC_LOCK, -1, 0, RLOCK_OK},
    {TC_HOLD_COUNT, 0, 0, 1},    {TC_LOCK, -1, 0, RLOCK_OK}, {TC_HOLD_COUNT, 0, 0, 2},
};

const tc_step tc_steps_count_down[4] = {
    {TC_UNLOCK, 0, 0, RLOCK_OK},
    {TC_HOLD_COUNT, 0, 0, 1},
    {TC_UNLOCK, 0, 0, RLOCK_OK},
    {TC_HOLD_COUNT, 0, 0, 0},
};

long long tc_step_call(rlock *l, tc_call call, int64_t a, int64_t b)
{
    switch (call) {
    case TC_LOCK:
        return rlock_lock(l, a);
    case TC_TRY:
        return rlock_try_lock(l, a, b);
    case TC_UNLOCK:
        return rlock_unlock(l);
    case TC_IS_LOCKED:
        return rlock_is_locked(l);
    case TC_IS_HELD:
        return rlock_is_held(l);
    case TC_HOLD_COUNT:
        return rlock_hold_count(l);
    case TC_FORCE_UNLOCK:
        return rlock_force_unlock(l);
    case TC_OTHER:
        break;
    }
    fail_msg("tc_step_call: call %d is not one of this thread's", (int)call);
    return 0;
}

void tc_run_steps(rlock *l, const tc_step *steps, size_t n, long long (*other)(rlock *l, int a))
{
    for (size_t i = 0; i < n; i++) {
        const tc_step *s = &steps[i];
        long long got =
            s->call == TC_OTHER ? other(l, (int)s->a) : tc_step_call(l, s->call, s->a, s->b);
        if (got != s->want) {
            fail_msg("step %zu (call %d, %lld, %lld): %lld, not %lld (%s)", i, (int)s->call,
                     (long long)s->a, (long long)s->b, got, s->want, rlock_last_error());
        }
    }
}
