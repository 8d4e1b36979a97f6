/*
 * A lock's waiting operation on a loop client, the part the reentrant (loop_lock.c), fair
 * (loop_fair.c), read-write (loop_rw.c) and spin (loop_spin.c) locks share: the owner, the channel,
 * the completion that records the grant. loop_wait.c runs its states; each lock type supplies its
 * attempt in a rlk_loop_wait_ops.
 */
#ifndef RLK_LOOP_LOCK_WAIT_H
#define RLK_LOOP_LOCK_WAIT_H

#include "lock.h"
#include "loop_wait.h"

/* A lock's waiting operation; the fair lock's record begins with one. */
typedef struct rlk_loop_lock_op {
    rlk_loop_wait w;
    rlk_acq a;        /* the owner's identity, field and lease, as a blocking acquire keeps them */
    rlk_obs_wait obs; /* the acquire as the observation core counts it (base/observe.h) */
    int undo_acked, undo_n; /* the replicas of a grant given back: acknowledged, counted */
    void (*on_lost)(rlock *lock, void *user_data); /* args->on_lost, given to the hold */
    void *lost_ud;
} rlk_loop_lock_op;

/* Fills op (zeroed by the caller) for rlock_lock_async()'s checked arguments. */
void rlk_loop_lock_prepare(rlk_loop_lock_op *op, rlock *lock, uint64_t tid,
                           const rlock_lock_args *args, rlock_done_fn done, void *user_data);
/* Starts op (its ops table set) and counts the acquire's begin: as rlk_loop_wait_start(). */
int rlk_loop_lock_begin(rlk_loop_client *lc, rlk_loop_lock_op *op, const rlock_cancel *cancel);
/* An attempt's reply decoded by decode (r: 1 acquired, 0 busy, < 0 error) or failed (err, a
 * Redis error reply), handed to the waiting operation with the holder's TTL as its sleep. A
 * grant fewer replicas acknowledged (rlk_sync_short()) is given back first: the operation then
 * waits on while its wait lasts, else ends with RLOCK_EREPLICA. */
void rlk_loop_lock_result(rlk_loop_lock_op *op, redisReply *rep, int err,
                          int (*decode)(rlk_loop_lock_op *op, redisReply *rep));
/* An operation given up while its attempt was on its way (a RedLock server that did not answer
 * within redlock_server_timeout_ms, loop_reentrant.c's rlk_loop_reentrant_abandon()): its done
 * already ran (w.done is NULL) and lost_ud holds a rlk_loop_back, the release of what the attempt
 * may take, formatted while the handle was known. The attempt's reply, or its give-back's, ends
 * here: a grant is given back with that release, then op is freed (the handle may be gone). */
typedef struct rlk_loop_back {
    size_t len;
    char cmd[];
} rlk_loop_back;
void rlk_loop_lock_abandoned_reply(rlk_loop_lock_op *op, redisReply *rep, int err);

/* The ops entries both locks use: join the lock's channel, the messages, the completion (an
 * RLOCK_OK records the hold, then done runs and op is freed). */
int rlk_loop_lock_join(rlk_loop_wait *w);
void rlk_loop_lock_say(rlk_loop_wait *w, int rc);
void rlk_loop_lock_complete(rlk_loop_wait *w, int rc);
/* For a queueing lock's close_leave: sends the EVALSHA request of script (cmd, len) as the data
 * connection's last request, its reply not read (SCRIPT LOAD first: no NOSCRIPT reply is read
 * any more). RLOCK_OK or an error. */
int rlk_loop_send_last(rlk_loop_client *lc, int script, const char *cmd, size_t len);

#endif
