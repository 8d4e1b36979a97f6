/*
 * The read-write lock on a loop client (loop_rw.h): lock_rw.c's requests as the table of a
 * lock's waiting operation (loop_lock_wait.h, loop_wait.h). A reader waits on Redisson's
 * channel; a writer that may queue on a writer-preferring client is in the waiting-writers zset
 * after its first busy attempt, a recorded waiter (loop_queue.h): rw_writer_heartbeat.lua keeps
 * its entry and, on a give-up, it sends rw_writer_leave.lua and reports only after its reply (a
 * free of the client queues the leave as its last request). Static helpers are named lrw_*.
 */
#include <stdlib.h>

#include "error.h"
#include "lock_rw.h"
#include "lock_rw_decode.h"
#include "loop_queue.h"
#include "loop_rw.h"
#include "loop_sync.h"

static int lrw_decode(rlk_loop_lock_op *l, redisReply *rep)
{
    return rlk_rw_check_acquire_reply(&l->a, rep);
}

static void lrw_on_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_queue_op *op = arg;
    rlk_loop_lock_result(&op->l, rep, err, lrw_decode);
}

static int lrw_attempt(rlk_loop_wait *w)
{
    rlk_loop_queue_op *op = rlk_loop_queue_of(w);
    char *cmd = NULL;
    size_t len = 0;
    int script = 0;
    int r = rlk_rw_attempt_format(&op->l.a, &script, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(w->base.lc, script, cmd, len, lrw_on_reply, op);
    free(cmd);
    op->queued |= r == RLOCK_OK && rlk_rw_writer_queues(&op->l.a);
    return r;
}

static int lrw_leave_format(rlk_loop_queue_op *op, int *script, char **cmd, size_t *len)
{
    *script = RLK_SCRIPT_RW_WRITER_LEAVE;
    return rlk_rw_writer_leave_format(&op->l.a, cmd, len);
}

/* The give-up: the heartbeat stops, and a recorded writer leaves (waking the readers queued
 * behind it) before done runs. A reader has nothing to leave. */
static int lrw_leave(rlk_loop_wait *w)
{
    return rlk_loop_queue_leave(w, lrw_leave_format);
}

/* The client is being freed: a recorded writer queues its leave as the last request. */
static int lrw_close_leave(rlk_loop_wait *w)
{
    return rlk_loop_queue_close_leave(w, lrw_leave_format);
}

/* The first busy reply recorded a queueing writer: its heartbeat starts with its wait. */
static int lrw_join(rlk_loop_wait *w)
{
    rlk_loop_queue_op *op = rlk_loop_queue_of(w);
    if (op->queued) {
        rlk_loop_queue_beat(op);
    }
    return rlk_loop_lock_join(w);
}

/* Gives back a grant fewer replicas acknowledged (loop_lock_wait.c), with no WAIT. */
static int lrw_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn)
{
    rlk_loop_lock_op *l = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    return rlk_loop_rw_release(l->w.base.lc, &l->a, 0, fn, l);
}

static const rlk_loop_wait_ops lrw_ops = {
    .attempt = lrw_attempt,
    .join = lrw_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_queue_complete,
    .leave = lrw_leave,
    .close_leave = lrw_close_leave,
    .give_back = lrw_give_back,
};

int rlk_loop_rw_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                     rlock_done_fn done, void *user_data)
{
    rlk_loop_queue_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(&op->l, lock, tid, args, done, user_data);
    op->l.w.ops = &lrw_ops;
    op->l.a.may_queue = args->wait_ms != 0;
    op->hb_script = RLK_SCRIPT_RW_WRITER_HEARTBEAT;
    op->what = "write lock";
    int r = rlk_loop_queue_begin(lc, op, args->cancel);
    if (r != RLOCK_OK) {
        free(op);
    }
    return r;
}

int rlk_loop_rw_release(rlk_loop_client *lc, rlk_acq *a, int synced, rlk_lconn_reply_fn fn,
                        void *arg)
{
    char *cmd = NULL;
    size_t len = 0;
    int script = 0;
    int r = rlk_rw_release_format(a, &script, &cmd, &len);
    if (r == RLOCK_OK) {
        r = synced ? rlk_loop_eval_synced(lc, script, cmd, len, fn, arg)
                   : rlk_loop_eval(lc, script, cmd, len, fn, arg);
    }
    free(cmd);
    return r;
}
