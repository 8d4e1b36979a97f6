/*
 * The fair lock (RLOCK_FAIR) on a loop client: a waiter queued in Redisson's list and zset,
 * kept alive there by a heartbeat on a loop timer, woken on its own channel, and taken out of
 * the queue by fair_leave.lua when it gives up (deadline, token, free of the client).
 */
#ifndef RLK_LOOP_FAIR_H
#define RLK_LOOP_FAIR_H

#include "lock.h"
#include "loop_client.h"

/* rlock_lock_async() of a fair handle, after loop_lock.c checked the arguments (owner tid). */
int rlk_loop_fair_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data);
/* Sends fair_release.lua for one hold of a->owner (lease_ms kept for the holds left); fn gets
 * its reply as rlk_notify_reply() reads it. */
int rlk_loop_fair_release(rlk_loop_client *lc, rlk_acq *a, int64_t lease_ms, rlk_lconn_reply_fn fn,
                          void *arg);

#endif
