/*
 * The read-write lock on a loop client (loop_rw.h): lock_rw.c's requests as the table of a
 * lock's waiting operation (loop_lock_wait.h, loop_wait.h). A reader waits on Redisson's
 * channel; a writer that may queue on a writer-preferring client is in the waiting-writers zset
 * after its first busy attempt, beats rw_writer_heartbeat.lua every third of waiter_timeout_ms
 * and, on a give-up, sends rw_writer_leave.lua and reports only after its reply (a free of the
 * client queues the leave as its last request). Static helpers are named lrw_*.
 */
#include <stdlib.h>

#include "error.h"
#include "lock_rw.h"
#include "lock_rw_decode.h"
#include "loop_lock_wait.h"
#include "loop_rw.h"
#include "loop_sync.h"

typedef struct lrw_op {
    rlk_loop_lock_op l; /* first: the lock's completion frees the record through it */
    rlk_loop_due hb;    /* the waiting writer's heartbeat, set while it is recorded */
    int queued;         /* an attempt that records the writer ran */
} lrw_op;

static lrw_op *lrw_of(rlk_loop_wait *w)
{
    return RLK_CONTAINER_OF(RLK_CONTAINER_OF(w, rlk_loop_lock_op, w), lrw_op, l);
}

static void lrw_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

static void lrw_complete(rlk_loop_wait *w, int rc)
{
    rlk_loop_due_del(w->base.lc, &lrw_of(w)->hb);
    rlk_loop_lock_complete(w, rc);
}

static int lrw_decode(rlk_loop_lock_op *l, redisReply *rep)
{
    return rlk_rw_check_acquire_reply(&l->a, rep);
}

static void lrw_on_reply(void *arg, redisReply *rep, int err)
{
    lrw_op *op = arg;
    rlk_loop_lock_result(&op->l, rep, err, lrw_decode);
}

static int lrw_attempt(rlk_loop_wait *w)
{
    lrw_op *op = lrw_of(w);
    char *cmd = NULL;
    size_t len = 0;
    int script = 0;
    int r = rlk_rw_attempt_format(&op->l.a, &script, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(w->base.lc, script, cmd, len, lrw_on_reply, op);
    free(cmd);
    op->queued |= r == RLOCK_OK && rlk_rw_writer_queues(&op->l.a);
    return r;
}

static void lrw_on_leave(void *arg, redisReply *rep, int err)
{
    lrw_op *op = arg;
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        rlk_log(op->l.a.client, RLOCK_LOG_WARN,
                "write lock '%s': could not leave the waiting writers (%s); the entry expires "
                "after waiter_timeout_ms",
                op->l.lock->name, err != RLOCK_OK ? rlock_last_error() : rep->str);
    }
    rlk_loop_wait_left(&op->l.w, err);
}

/* The give-up: the heartbeat stops, and a recorded writer leaves (waking the readers queued
 * behind it) before done runs. A reader has nothing to leave. */
static int lrw_leave(rlk_loop_wait *w)
{
    lrw_op *op = lrw_of(w);
    rlk_loop_due_clear(w->base.lc, &op->hb);
    if (!op->queued) {
        return 0;
    }
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_rw_writer_leave_format(&op->l.a, &cmd, &len);
    r = r ? r : rlk_loop_eval(w->base.lc, RLK_SCRIPT_RW_WRITER_LEAVE, cmd, len, lrw_on_leave, op);
    free(cmd);
    return r == RLOCK_OK;
}

/* The client is being freed: a recorded writer queues its leave as the last request. */
static int lrw_close_leave(rlk_loop_wait *w)
{
    lrw_op *op = lrw_of(w);
    if (!op->queued || !rlk_loop_can_send_last(w->base.lc)) {
        return 0;
    }
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_rw_writer_leave_format(&op->l.a, &cmd, &len);
    r = r ? r : rlk_loop_send_last(w->base.lc, RLK_SCRIPT_RW_WRITER_LEAVE, cmd, len);
    free(cmd);
    return r == RLOCK_OK;
}

static void lrw_beat_later(lrw_op *op)
{
    int64_t beat = op->l.a.client->opts.waiter_timeout_ms / 3;
    rlk_loop_due_set(op->l.w.base.lc, &op->hb, beat > 0 ? beat : 1);
}

/* The first busy reply recorded a queueing writer: its heartbeat starts with its wait. */
static int lrw_join(rlk_loop_wait *w)
{
    lrw_op *op = lrw_of(w);
    if (op->queued) {
        lrw_beat_later(op);
    }
    return rlk_loop_lock_join(w);
}

/* The heartbeat: the writer's deadline in the zset moves on (the script puts back an entry
 * that expired); one that cannot be sent is made up by the next, the entry living three
 * beats, so the reply is not needed. */
static void lrw_on_heartbeat(rlk_loop_due *due)
{
    lrw_op *op = RLK_CONTAINER_OF(due, lrw_op, hb);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, op->l.lock->name, op->l.lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, op->l.a.client->opts.waiter_timeout_ms);
    rlk_args_add(&args, op->l.a.field, op->l.a.field_len);
    char *cmd = NULL;
    size_t len = 0;
    if (rlk_script_format(RLK_SCRIPT_RW_WRITER_HEARTBEAT, &keys, &args, &cmd, &len) == RLOCK_OK) {
        (void)rlk_loop_eval(op->l.w.base.lc, RLK_SCRIPT_RW_WRITER_HEARTBEAT, cmd, len, lrw_ignore,
                            NULL);
    }
    free(cmd);
    lrw_beat_later(op);
}

static const rlk_loop_wait_ops lrw_ops = {
    .attempt = lrw_attempt,
    .join = lrw_join,
    .say = rlk_loop_lock_say,
    .complete = lrw_complete,
    .leave = lrw_leave,
    .close_leave = lrw_close_leave,
};

/* Gives back a grant fewer replicas acknowledged (loop_lock_wait.c), with no WAIT. */
static int lrw_give_back(rlk_loop_lock_op *l, rlk_lconn_reply_fn fn)
{
    return rlk_loop_rw_release(l->w.base.lc, &l->a, 0, fn, l);
}

int rlk_loop_rw_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                     rlock_done_fn done, void *user_data)
{
    lrw_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(&op->l, lock, tid, args, done, user_data);
    op->l.w.ops = &lrw_ops;
    op->l.give_back = lrw_give_back;
    op->l.a.may_queue = args->wait_ms != 0;
    op->hb.fire = lrw_on_heartbeat;
    int r = rlk_loop_due_add(lc);
    if (r != RLOCK_OK) {
        free(op);
        return r;
    }
    r = rlk_loop_lock_begin(lc, &op->l, args->cancel);
    if (r != RLOCK_OK) {
        rlk_loop_due_del(lc, &op->hb);
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
