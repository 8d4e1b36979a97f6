/*
 * Hold records of a handle (lock_hold.c).
 */
#ifndef RLK_LOCK_HOLD_H
#define RLK_LOCK_HOLD_H

#include "lock.h"

/* Hold-record access, also for group implementations that record a grant or release done
 * outside the wait loop (RedLock sends its own pipelined acquires). rlk_hold_get() finds the
 * record of (l, tid), creating a zeroed one of ops->hold_size bytes when create is set.
 * drop_if_empty forgets a record whose count is 0; forget_all every record of a handle that is
 * being destroyed; forget one record (its renewal stopped, its end reported as forgotten unless
 * reported before). */
rlk_hold *rlk_hold_get(rlock *l, uint64_t tid, int create);
void rlk_hold_drop_if_empty(rlock *l, rlk_hold *h);
void rlk_hold_forget_all(rlock *l);
void rlk_hold_forget(rlock *l, rlk_hold *h);
/* Stops the hold's renewal (a no-op when it has none). Never called with l->mu held: the cancel
 * may wait for an in-flight batch. */
void rlk_hold_stop_renewal(rlock *l, rlk_hold *h);

/* A hold the watchdog judged lost (its lease ran out unrenewed, by the client's clock) may still
 * stand on Redis: a renewal that ran but whose reply was lost, or one a failover kept, extended
 * it past the client's reckoning. The record counts no hold any more but is marked as after a
 * grant whose reply was lost (RLK_UNSURE_GRANT), so that the thread's next lock gives such a
 * hold back before it attempts, instead of re-entering it with its old token. Reports the end
 * (RLK_HOLD_LOST) if not reported yet. The caller stopped the renewal. */
void rlk_hold_lost_unsure(rlock *l, rlk_hold *h);

/* The renew class pieces shared by hash-based holds: key = the lock name, field = a->field of
 * the hold's thread; lost() marks the hold lost and calls the client's on_lost once. */
int rlk_hold_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field);
void rlk_hold_on_lost(rlk_wd_entry *e);
/* Calls the on_lost callback of l's client (if set) with l's name: the one place it is called. */
void rlk_notify_lost(const rlock *l);

#endif
