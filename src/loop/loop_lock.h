/*
 * A single-name lock's acquire started by its kind (loop_reentrant.c, loop_fair.c, loop_rw.c,
 * loop_spin.c) and its release, for rlock_lock_async() and rlock_unlock_async() (loop_api.c)
 * and the groups' members (loop_group.c).
 */
#ifndef RLK_LOOP_LOCK_H
#define RLK_LOOP_LOCK_H

#include "loop_client.h"
#include "loop_lock_wait.h"

/* Starts acquiring lock (any single-name kind, on loop client lc) for the owner numbered tid with
 * args already checked, as rlock_lock_async() does after its checks: RLOCK_OK and done later, or
 * an error and no done. The groups (loop_group.c) start their members with it. */
int rlk_loop_lock_start(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                        rlock_done_fn done, void *user_data);
/* Starts releasing tid's hold of lock, as rlock_unlock_async() does after its owner check:
 * RLOCK_ECLOSED for a freed client, RLOCK_EINVAL for a threaded one. */
int rlk_loop_unlock_start(rlock *lock, uint64_t tid, rlock_done_fn done, void *user_data);

#endif
