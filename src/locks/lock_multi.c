/*
 * The multi-lock (Redisson RMultiLock): one handle over n member handles of any types, clients
 * and servers, taken all-or-nothing in rounds that never wait while holding a member (no
 * deadlock) and pause at random after failed rounds (no livelock); leases end at most one sweep
 * apart. docs/locks/multi.md explains the design. Static helpers are named multi_*; what both
 * group types share is in lock_group.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "lock_group.h"
#include "lock_hold.h"
#include "lock_lost.h"
#include "lock_multi.h"
#include "lock_observe.h"

/* The longest random pause between failed rounds, in ms. */
#define MULTI_MAX_BACKOFF_MS 20

typedef struct multi_group {
    size_t n;
    rlock **members; /* borrowed handles, in the caller's order */
} multi_group;

static multi_group *multi_of(rlock *l)
{
    return (multi_group *)l->impl;
}

/* Gives back one hold of each of the first k members taken in this round (taken[i] != 0). */
static void multi_giveback(multi_group *m, const unsigned char *taken)
{
    for (size_t i = 0; i < m->n; i++) {
        if (taken[i]) {
            /* Only the calling thread's hold is released; an error here (connection lost)
             * leaves a hold that expires with its lease, and the round still fails. */
            (void)rlock_unlock(m->members[i]);
        }
    }
}

/* Remaining wait for a member call: RLOCK_WAIT_FOREVER without a deadline. */
static int64_t multi_left(int64_t deadline)
{
    if (deadline == INT64_MAX) {
        return RLOCK_WAIT_FOREVER;
    }
    int64_t left = deadline - rlk_now_ms();
    return left > 0 ? left : 0;
}

/* One round. first is the member to wait for (or SIZE_MAX for none). Returns RLOCK_OK with every
 * member held, RLOCK_ETIMEDOUT with *busy set to the member that was busy (nothing held), or
 * another error (nothing held). */
static int multi_round(multi_group *m, unsigned char *taken, size_t first, int64_t deadline,
                       int64_t lease_ms, size_t *busy)
{
    memset(taken, 0, m->n);
    int64_t sweep_start = 0;
    if (first != SIZE_MAX) {
        int rc = rlock_try_lock(m->members[first], multi_left(deadline), lease_ms);
        if (rc != RLOCK_OK) {
            *busy = SIZE_MAX; /* the wait ran out (or failed): nothing to retry */
            return rc;
        }
        taken[first] = 1;
        sweep_start = rlk_now_ms();
    }
    for (size_t i = 0; i < m->n; i++) {
        if (taken[i]) {
            continue;
        }
        int rc = rlock_try_lock(m->members[i], 0, lease_ms);
        if (rc != RLOCK_OK) {
            multi_giveback(m, taken);
            *busy = rc == RLOCK_ETIMEDOUT ? i : SIZE_MAX;
            return rc;
        }
        taken[i] = 1;
        if (sweep_start == 0) {
            sweep_start = rlk_now_ms();
        }
    }
    if (lease_ms > 0 && rlk_now_ms() - sweep_start >= lease_ms) {
        /* The first member's lease may have run out while the others were taken. */
        multi_giveback(m, taken);
        *busy = first != SIZE_MAX ? first : 0;
        return rlk_err(RLOCK_ETIMEDOUT, "multi-lock: the sweep outlasted the %lld ms lease",
                       (long long)lease_ms);
    }
    return RLOCK_OK;
}

static int multi_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    multi_group *m = multi_of(l);
    unsigned char small[64];
    unsigned char *taken = m->n <= sizeof(small) ? small : malloc(m->n);
    if (taken == NULL) {
        return rlk_err(RLOCK_ENOMEM, "multi-lock: out of memory");
    }
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    size_t first = SIZE_MAX;
    int failures = 0;
    int rc;
    for (;;) {
        size_t busy = SIZE_MAX;
        /* A token fired between rounds (while nothing is held) ends the wait here. */
        rc = rlk_cancel_check(rlk_call_cancel(), "multi-lock", "group");
        if (rc != RLOCK_OK) {
            break;
        }
        rc = multi_round(m, taken, first, deadline, lease_ms, &busy);
        if (rc != RLOCK_ETIMEDOUT || wait_ms == 0 || rlk_now_ms() >= deadline) {
            break;
        }
        if (busy == SIZE_MAX) {
            break; /* the wait for the busy member itself ran out */
        }
        failures++;
        if (failures >= 2) {
            int64_t cap = failures * 2 > MULTI_MAX_BACKOFF_MS ? MULTI_MAX_BACKOFF_MS : failures * 2;
            int64_t pause = (int64_t)(rlk_group_rand() % (uint64_t)(cap + 1));
            int64_t left = deadline == INT64_MAX ? pause : deadline - rlk_now_ms();
            rlk_group_sleep_ms(pause < left ? pause : left);
        }
        first = busy;
    }
    if (taken != small) {
        free(taken);
    }
    if (rc == RLOCK_OK) {
        /* The group's own per-thread count lives in the handle's hold records (lock.h). */
        rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 1);
        if (h == NULL) {
            for (size_t i = 0; i < m->n; i++) {
                (void)rlock_unlock(m->members[i]);
            }
            return rlk_err(RLOCK_ENOMEM, "multi-lock: out of memory recording the hold");
        }
        h->count++;
    } else if (rc == RLOCK_ETIMEDOUT) {
        rlk_err(RLOCK_ETIMEDOUT, "multi-lock: not every member could be taken within %lld ms",
                (long long)wait_ms);
    }
    return rc;
}

static int multi_unlock(rlock *l)
{
    multi_group *m = multi_of(l);
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    if (h == NULL || h->count <= 0) {
        return rlk_err(RLOCK_ENOTOWNER, "multi-lock: the calling thread does not hold the group");
    }
    int first_err = RLOCK_OK;
    char msg[256] = "";
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_unlock(m->members[i]);
        if (rc != RLOCK_OK && first_err == RLOCK_OK) {
            first_err = rc;
            snprintf(msg, sizeof(msg), "%s", rlock_last_error());
        }
    }
    h->count--;
    if (h->count == 0) {
        rlk_hold_obs_end(l, h, first_err == RLOCK_ELOST ? RLK_HOLD_LOST : RLK_HOLD_RELEASED);
    }
    rlk_hold_drop_if_empty(l, h);
    if (first_err != RLOCK_OK) {
        return rlk_err(first_err, "multi-lock: unlocking a member failed: %s", msg);
    }
    return RLOCK_OK;
}

static int multi_is_locked(rlock *l)
{
    multi_group *m = multi_of(l);
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_is_locked(m->members[i]);
        if (rc != 0) {
            return rc; /* 1 (some member is locked) or an error */
        }
    }
    return 0;
}

static int multi_is_held(rlock *l)
{
    multi_group *m = multi_of(l);
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_is_held(m->members[i]);
        if (rc != 1) {
            return rc; /* 0 (some member is not held) or an error */
        }
    }
    return 1;
}

static uint64_t multi_token(rlock *l)
{
    (void)l;
    return 0;
}

static void multi_destroy(rlock *l)
{
    multi_group *m = multi_of(l);
    if (m == NULL) {
        return;
    }
    rlk_hold_forget_all(l); /* holds of threads that never unlocked */
    for (size_t i = 0; i < m->n; i++) {
        rlk_hold_cb_group_gone(m->members[i], l); /* loss callbacks forwarded to this handle */
    }
    free(m->members);
    free(m);
    l->impl = NULL;
}

/* Extends every member's hold; RLOCK_ELOST when any member's was gone (the others are extended
 * all the same: the caller decides whether to unlock the group). */
static int multi_extend(rlock *l, int64_t lease_ms)
{
    multi_group *m = multi_of(l);
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    if (h == NULL || h->count <= 0) {
        return rlk_err(RLOCK_ENOTOWNER, "multi-lock: this owner does not hold the group");
    }
    int first_err = RLOCK_OK;
    char msg[256] = "";
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlk_client_enter(m->members[i]->client);
        rc = rc ? rc : m->members[i]->ops->extend(m->members[i], lease_ms);
        if (rc != RLOCK_OK && (first_err == RLOCK_OK || rc == RLOCK_ELOST)) {
            first_err = rc;
            snprintf(msg, sizeof(msg), "%s", rlock_last_error());
        }
    }
    if (first_err != RLOCK_OK) {
        return rlk_err(first_err, "multi-lock: extending a member failed: %s", msg);
    }
    return RLOCK_OK;
}

static rlock *multi_first(rlock *l)
{
    return multi_of(l)->members[0];
}

static const rlk_lock_ops multi_ops = {
    RLK_GROUP_LOCK_OPS(multi_acquire, multi_unlock, multi_is_locked, multi_is_held, multi_token,
                       multi_destroy),
    .extend = multi_extend,
    .obs_kind = RLOCK_MK_MULTI,
    .first_member = multi_first,
};

rlock *const *rlk_group_members(rlock *l, size_t *n)
{
    if (l->ops != &multi_ops) {
        *n = 0;
        return NULL;
    }
    *n = multi_of(l)->n;
    return multi_of(l)->members;
}

RLOCK_EXPORT rlock *rlock_multi_new(rlock *const *locks, size_t n)
{
    if (rlk_group_check_members(locks, n, 0) != RLOCK_OK) {
        return NULL;
    }
    rlock *l = NULL;
    multi_group *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        goto nomem;
    }
    m->members = calloc(n, sizeof(rlock *));
    if (m->members == NULL) {
        goto nomem;
    }
    l = rlk_handle_alloc(&multi_ops);
    if (l == NULL) {
        goto nomem;
    }
    memcpy(m->members, locks, n * sizeof(rlock *));
    m->n = n;
    l->impl = m;
    return l;
nomem:
    if (m != NULL) {
        free(m->members);
    }
    free(m);
    rlk_err(RLOCK_ENOMEM, "rlock_multi_new: out of memory");
    return NULL;
}
