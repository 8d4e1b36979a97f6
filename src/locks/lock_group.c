/*
 * What the two group lock types share (lock_group.h): member checks, the operations a group does
 * not have, and the random pauses between rounds.
 */
#include <time.h>

#include "cancel.h"
#include "error.h"
#include "lock_group.h"

int rlk_group_check_members(rlock *const *locks, size_t n, int redlock)
{
    const char *what = redlock ? "rlock_redlock_new" : "rlock_multi_new";
    if (locks == NULL || n == 0 || (redlock && n > RLK_REDLOCK_MAX)) {
        return rlk_err(RLOCK_EINVAL, "%s: needs 1 to %s member locks", what,
                       redlock ? "16" : "any number of");
    }
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL || locks[i]->ops->group) {
            return rlk_err(RLOCK_EINVAL, "%s: member %zu is NULL or a group", what, i);
        }
        if (redlock && locks[i]->kind != RLOCK_REENTRANT) {
            return rlk_err(RLOCK_ENOTSUP, "%s: member %zu: only reentrant locks", what, i);
        }
        for (size_t j = 0; j < i; j++) {
            if (locks[j] == locks[i] || (redlock && locks[j]->client == locks[i]->client)) {
                return rlk_err(RLOCK_EINVAL, "%s: members %zu and %zu are the same handle%s", what,
                               j, i, redlock ? " or share a client" : "");
            }
        }
    }
    return RLOCK_OK;
}

int rlk_group_unsupported(rlock *l)
{
    (void)l;
    return rlk_err(RLOCK_ENOTSUP, "not supported on a multi-lock or RedLock group");
}

int64_t rlk_group_ttl(rlock *l)
{
    return RLOCK_TTL_ERROR(rlk_group_unsupported(l));
}

uint64_t rlk_group_rand(void)
{
    static _Thread_local uint64_t state;
    if (state == 0) {
        state = (rlk_thread_id() * UINT64_C(0x9E3779B97F4A7C15)) ^ (uint64_t)rlk_now_us() ^
                ((uint64_t)(uintptr_t)&state << 17);
        state |= 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

void rlk_group_sleep_ms(int64_t ms)
{
    if (ms <= 0) {
        return;
    }
    (void)rlk_cancel_sleep(rlk_call_cancel(), rlk_add_sat(rlk_now_ms(), ms));
}
