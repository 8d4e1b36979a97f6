/*
 * rlock_lock_async() and rlock_unlock_async() (include/rlock_async.h) for the reentrant lock:
 * an operation that attempts, subscribes, waits for a message, its timer or its token, and
 * attempts again; a fair handle's calls go to loop_fair.c. docs/internals/event-loop.md
 * describes the states.
 */
#ifndef RLK_LOOP_LOCK_H
#define RLK_LOOP_LOCK_H

#include "lock.h"
#include "loop_client.h"

/* Records a grant to a->tid of lock (count, token, lease, field; the loop watchdog for a
 * watchdog hold): RLOCK_OK, or RLOCK_ENOMEM. */
int rlk_loop_hold_grant(rlk_loop_client *lc, rlock *lock, const rlk_acq *a);

#endif
