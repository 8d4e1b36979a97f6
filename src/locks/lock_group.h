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

/* A per-thread xorshift generator for the random pauses between rounds (quality is irrelevant;
 * it only has to differ between threads and processes). */
uint64_t rlk_group_rand(void);
/* Sleeps ms milliseconds (nothing if ms <= 0). */
void rlk_group_sleep_ms(int64_t ms);

#endif
