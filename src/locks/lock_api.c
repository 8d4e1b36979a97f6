/*
 * The public entry points of every lock type (rlock_lock, rlock_try_lock, rlock_unlock and the
 * queries): argument checks, the client check, and the observation of each call around the
 * type's table of functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_fork.h"
#include "error.h"
#include "lock.h"
#include "lock_hold.h"
#include "lock_observe.h"

static int check_handle(rlock *l)
{
    if (l == NULL) {
        return rlk_err(RLOCK_EINVAL, "lock must not be NULL");
    }
    /* A group has no client of its own: each member call checks its member's. */
    if (l->ops->group) {
        return RLOCK_OK;
    }
    int r = rlk_client_enter(l->client);
    return r ? r : rlk_client_blocking(l->client, "a blocking lock call");
}

/* l->ops->acquire() observed as one acquire call (begin, end, and the start of the hold it made).
 * A group's member calls inside the group's call are not observed: the group is. */
static int acquire_observed(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (rlk_obs_in_group()) {
        return l->ops->acquire(l, wait_ms, lease_ms);
    }
    rlk_obs_target t;
    rlk_obs_target_of(l, rlk_thread_id(), &t);
    rlk_obs_wait w;
    rlk_obs_acquire_begin(t.client, &w, t.kind, t.name, t.owner);
    rlk_obs_group_set(l->ops->group);
    int r = l->ops->acquire(l, wait_ms, lease_ms);
    rlk_obs_group_set(0);
    int count = 0;
    uint64_t token = 0;
    rlk_hold *h = r == RLOCK_OK ? rlk_hold_get(l, rlk_thread_id(), 0) : NULL;
    if (h != NULL) {
        count = h->count;
        token = h->token;
        if (count == 1) {
            atomic_store_explicit(&h->obs_t0, rlk_obs_now_ns(), memory_order_relaxed);
        }
    }
    return rlk_obs_acquire_end(t.client, &w, t.name, t.owner, r, token, count);
}

/* l->ops->unlock(), a group's member calls inside it unobserved (a full release reports itself
 * through rlk_hold_obs_end()). */
static int unlock_observed(rlock *l)
{
    int was = rlk_obs_group_set(rlk_obs_in_group() || l->ops->group);
    int r = l->ops->unlock(l);
    rlk_obs_group_set(was);
    return r;
}

static int check_lease(int64_t lease_ms)
{
    if (lease_ms == 0 || lease_ms > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "lease_ms must be < 0 (watchdog) or in [1, %lld], got %lld",
                       (long long)RLOCK_MAX_DURATION_MS, (long long)lease_ms);
    }
    return RLOCK_OK;
}

RLOCK_EXPORT int rlock_lock(rlock *lock, int64_t lease_ms)
{
    int r = check_handle(lock);
    r = r ? r : check_lease(lease_ms);
    return r ? r : acquire_observed(lock, -1, lease_ms < 0 ? -1 : lease_ms);
}

RLOCK_EXPORT int rlock_try_lock(rlock *lock, int64_t wait_ms, int64_t lease_ms)
{
    int r = check_handle(lock);
    r = r ? r : check_lease(lease_ms);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    /* Waits beyond the cap mean "no limit", so deadline arithmetic can never overflow. */
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    return acquire_observed(lock, wait, lease_ms < 0 ? -1 : lease_ms);
}

#define RLK_DISPATCH(lock, fn, ...)                                                                \
    do {                                                                                           \
        int r_ = check_handle(lock);                                                               \
        if (r_ != RLOCK_OK) {                                                                      \
            return r_;                                                                             \
        }                                                                                          \
        return (lock)->ops->fn(__VA_ARGS__);                                                       \
    } while (0)

RLOCK_EXPORT int rlock_unlock(rlock *lock)
{
    int r = check_handle(lock);
    return r != RLOCK_OK ? r : unlock_observed(lock);
}

RLOCK_EXPORT int rlock_force_unlock(rlock *lock)
{
    RLK_DISPATCH(lock, force_unlock, lock);
}

RLOCK_EXPORT int rlock_is_locked(rlock *lock)
{
    RLK_DISPATCH(lock, is_locked, lock);
}

RLOCK_EXPORT int rlock_is_held(rlock *lock)
{
    RLK_DISPATCH(lock, is_held, lock);
}

RLOCK_EXPORT int rlock_hold_count(rlock *lock)
{
    RLK_DISPATCH(lock, hold_count, lock);
}

RLOCK_EXPORT int64_t rlock_remaining_ttl_ms(rlock *lock)
{
    int r = check_handle(lock);
    return r != RLOCK_OK ? RLOCK_TTL_ERROR(r) : lock->ops->ttl(lock);
}

RLOCK_EXPORT uint64_t rlock_token(rlock *lock)
{
    return check_handle(lock) != RLOCK_OK ? 0 : lock->ops->token(lock);
}
