/*
 * rlock_lock_async() and rlock_unlock_async() (include/rlock_async.h) for the reentrant lock:
 * an operation that attempts, subscribes, waits for a message, its timer or its token, and
 * attempts again (loop_wait.c runs the states); a fair, read or write, or spin handle's calls
 * go to loop_fair.c, loop_rw.c or loop_spin.c.
 * docs/internals/event-loop.md describes the states.
 */
#ifndef RLK_LOOP_LOCK_H
#define RLK_LOOP_LOCK_H

#include "loop_client.h"
#include "loop_lock_wait.h"

/* Gives back a reentrant or spin grant the replicas did not all acknowledge (loop_lock_wait.c):
 * lock_release.lua with no WAIT, its reply to fn(op, ...). */
int rlk_loop_reentrant_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn);

/* Starts acquiring lock (reentrant or fair, on loop client lc) for the owner numbered tid with
 * args already checked, as rlock_lock_async() does after its checks: RLOCK_OK and done later, or
 * an error and no done. The groups (loop_group.c) start their members with it. */
int rlk_loop_lock_start(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                        rlock_done_fn done, void *user_data);
/* Starts releasing tid's hold of lock, as rlock_unlock_async() does after its owner check:
 * RLOCK_ECLOSED for a freed client, RLOCK_EINVAL for a threaded one. */
int rlk_loop_unlock_start(rlock *lock, uint64_t tid, rlock_done_fn done, void *user_data);

#endif
