/*
 * The reentrant lock on a loop client: an operation that attempts, subscribes, waits for a
 * message, its timer or its token, and attempts again (loop_wait.c runs the states; the states
 * are in docs/internals/event-loop.md), and its release request.
 */
#ifndef RLK_LOOP_REENTRANT_H
#define RLK_LOOP_REENTRANT_H

#include "loop_client.h"
#include "loop_lock_wait.h"

/* Starts acquiring the reentrant lock (args checked, as rlk_loop_lock_start()). */
int rlk_loop_reentrant_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid,
                            const rlock_lock_args *args, rlock_done_fn done, void *user_data);
/* The same, with the operation's record in *out (NULL when it did not start) for
 * rlk_loop_reentrant_abandon(); the record is freed when done runs. */
int rlk_loop_reentrant_lock_op(rlk_loop_client *lc, rlock *lock, uint64_t tid,
                               const rlock_lock_args *args, rlock_done_fn done, void *user_data,
                               rlk_loop_lock_op **out);
/* Gives up op while its attempt is on its way (a RedLock server that did not answer within
 * redlock_server_timeout_ms): it leaves the client's lists, its done will not run, and what
 * the attempt may take is given back when its reply comes (rlk_loop_lock_abandoned_reply()).
 * 1 when abandoned; 0 when it could not be (no attempt on its way, or no memory): it then ends
 * as usual. */
int rlk_loop_reentrant_abandon(rlk_loop_lock_op *op);
/* The release's request of a's hold on l with lease_ms for the holds left: lock_release.lua with
 * the lock's channel, waiters zset and wake prefix, so a waiting rlock thread is named and a
 * Redisson waiter gets "0"; no grant keys (a loop release wakes, it does not grant). */
int rlk_loop_reentrant_release_format(rlock *l, rlk_acq *a, int64_t lease_ms, char **cmd,
                                      size_t *len);
/* Gives back a reentrant or spin grant the replicas did not all acknowledge (loop_lock_wait.c):
 * lock_release.lua with no WAIT, its reply to fn(op, ...). */
int rlk_loop_reentrant_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn);

#endif
