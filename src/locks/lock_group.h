/*
 * What the two group lock types (lock_multi.c and lock_redlock.c) share; lock_group.c.
 */
#ifndef RLK_LOCK_GROUP_H
#define RLK_LOCK_GROUP_H

#include "lock.h"

/* The most servers of a RedLock (and of its parallel round). */
#define RLK_REDLOCK_MAX 16

/* Checks a member list: locks != NULL, n >= 1, no NULL member, no member that is itself a group,
 * no handle twice; for a RedLock also n <= RLK_REDLOCK_MAX, reentrant members only (else
 * RLOCK_ENOTSUP) and one client per member. RLOCK_OK or RLOCK_EINVAL with a message. */
int rlk_group_check_members(rlock *const *locks, size_t n, int redlock);

/* RLOCK_ENOTSUP for the operations a group does not have (force unlock, hold count, TTL). */
int rlk_group_unsupported(rlock *l);
int64_t rlk_group_ttl(rlock *l);

/* The rlk_lock_ops of every group type, as designated initializers to put between the table's
 * braces: the group's own calls, and what no group has (force unlock, hold count, TTL) from one
 * list. A type that keeps more per hold adds .hold_size after it. */
#define RLK_GROUP_LOCK_OPS(acquire_fn, unlock_fn, is_locked_fn, is_held_fn, token_fn, destroy_fn)  \
    .acquire = (acquire_fn), .unlock = (unlock_fn), .force_unlock = rlk_group_unsupported,         \
    .is_locked = (is_locked_fn), .is_held = (is_held_fn), .hold_count = rlk_group_unsupported,     \
    .ttl = rlk_group_ttl, .token = (token_fn), .destroy = (destroy_fn), .group = 1

/* A per-thread xorshift generator for the random pauses between rounds (quality is irrelevant;
 * it only has to differ between threads and processes). */
uint64_t rlk_group_rand(void);
/* Sleeps ms milliseconds (nothing if ms <= 0), or less when the call's token fires
 * (rlk_call_cancel()). */
void rlk_group_sleep_ms(int64_t ms);

#endif
