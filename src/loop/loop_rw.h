/*
 * The read-write lock (RLOCK_READ, RLOCK_WRITE) on a loop client: the threaded lock's scripts
 * and data (lock_rw.h), readers woken on Redisson's channel, a waiting writer of a
 * writer-preferring client recorded in the waiting-writers zset, kept there by a heartbeat on a
 * loop timer, woken on its own channel, and taken out by rw_writer_leave.lua when it gives up.
 */
#ifndef RLK_LOOP_RW_H
#define RLK_LOOP_RW_H

#include "lock.h"
#include "loop_client.h"

/* rlock_lock_async() of a read or write handle, after loop_lock.c checked the arguments. */
int rlk_loop_rw_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                     rlock_done_fn done, void *user_data);
/* Sends the release of one hold of a->owner on a's side; fn gets its reply as
 * rlk_notify_reply() reads it. synced: with the replica sync (loop_sync.h). */
int rlk_loop_rw_release(rlk_loop_client *lc, rlk_acq *a, int synced, rlk_lconn_reply_fn fn,
                        void *arg);

#endif
