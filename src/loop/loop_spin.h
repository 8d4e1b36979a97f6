/*
 * The spin lock (RLOCK_SPIN) on a loop client: the reentrant lock's data and attempt, no
 * subscription; a busy attempt is made again on the operation's loop timer after the pause of
 * the threaded spin lock's back-off (lock_spin.h).
 */
#ifndef RLK_LOOP_SPIN_H
#define RLK_LOOP_SPIN_H

#include "lock.h"
#include "loop_client.h"

/* rlock_lock_async() of a spin handle, after loop_lock.c checked the arguments. */
int rlk_loop_spin_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data);

#endif
