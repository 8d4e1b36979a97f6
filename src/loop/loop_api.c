/*
 * rlock_lock_async() and rlock_unlock_async() (include/rlock_async.h): the checks of the
 * arguments, then a group's call (loop_group.c) or a single-name lock's start (loop_lock.c).
 * Static helpers are named lap_*.
 */
#include <stdlib.h>

#include "cancel.h"
#include "error.h"
#include "lock.h"
#include "loop_group.h"
#include "loop_lock.h"
#include "owner.h"

/* The checks of rlock_lock_async() that need no allocation; *lc and *tid on success. */
static int lap_check(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                     rlk_loop_client **lc, uint64_t *tid)
{
    if (lock == NULL || args == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_async: lock, args and done must not be NULL");
    }
    for (size_t i = 0; i < sizeof(args->reserved) / sizeof(args->reserved[0]); i++) {
        if (args->reserved[i] != NULL) {
            return rlk_err(RLOCK_EINVAL, "rlock_lock_async: reserved fields must be NULL");
        }
    }
    int r = rlk_client_check(lock->client);
    if (r == RLOCK_OK && (*lc = rlk_loop_of(lock->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async needs a loop client (rlock_async.h)");
    }
    if (r == RLOCK_OK && ((args->wait_ms < 0 && args->wait_ms != RLOCK_WAIT_FOREVER) ||
                          args->lease_ms == 0 || args->lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async: bad wait_ms or lease_ms");
    }
    r = r ? r : rlk_owner_tid(args->owner, lock->client, "rlock_lock_async", tid);
    return r ? r : rlk_cancel_check(args->cancel, "lock", lock->name);
}

RLOCK_EXPORT int rlock_lock_async(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                                  void *user_data)
{
    if (lock != NULL && lock->ops->group) {
        return rlk_loop_group_lock(lock, args, done, user_data);
    }
    rlk_loop_client *lc = NULL;
    uint64_t tid = 0;
    int r = lap_check(lock, args, done, &lc, &tid);
    if (r != RLOCK_OK || lc == NULL) {
        return r != RLOCK_OK ? r : RLOCK_EINVAL;
    }
    return rlk_loop_lock_start(lc, lock, tid, args, done, user_data);
}

RLOCK_EXPORT int rlock_unlock_async(rlock *lock, rlock_owner *owner, rlock_done_fn done,
                                    void *user_data)
{
    if (lock == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_unlock_async: lock and done must not be NULL");
    }
    if (lock->ops->group) {
        return rlk_loop_group_unlock(lock, owner, done, user_data);
    }
    uint64_t tid = 0;
    int r = rlk_owner_tid(owner, lock->client, "rlock_unlock_async", &tid);
    return r ? r : rlk_loop_unlock_start(lock, tid, done, user_data);
}
