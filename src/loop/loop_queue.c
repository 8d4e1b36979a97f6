/*
 * A recorded lock waiter on a loop client (loop_queue.h): its heartbeat on the client's due
 * times and its leave. Static helpers are named lq_*.
 */
#include <stdlib.h>

#include "error.h"
#include "loop_queue.h"

static void lq_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

rlk_loop_queue_op *rlk_loop_queue_of(rlk_loop_wait *w)
{
    return RLK_CONTAINER_OF(RLK_CONTAINER_OF(w, rlk_loop_lock_op, w), rlk_loop_queue_op, l);
}

void rlk_loop_queue_beat(rlk_loop_queue_op *op)
{
    int64_t beat = op->l.a.client->opts.waiter_timeout_ms / 3;
    rlk_loop_due_set(op->l.w.base.lc, &op->hb, beat > 0 ? beat : 1);
}

/* The heartbeat: the entry's deadline moves on (a waiter no longer recorded is told by the
 * script, and its next attempt records it again), so the reply is not needed; one that cannot
 * be sent is made up by the next, the entry living three beats. */
static void lq_on_heartbeat(rlk_loop_due *due)
{
    rlk_loop_queue_op *op = RLK_CONTAINER_OF(due, rlk_loop_queue_op, hb);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, op->l.a.lock->name, op->l.a.lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, op->l.a.client->opts.waiter_timeout_ms);
    rlk_args_add(&args, op->l.a.field, op->l.a.field_len);
    char *cmd = NULL;
    size_t len = 0;
    if (rlk_script_format(op->hb_script, &keys, &args, &cmd, &len) == RLOCK_OK) {
        (void)rlk_loop_eval(op->l.w.base.lc, op->hb_script, cmd, len, lq_ignore, NULL);
    }
    free(cmd);
    rlk_loop_queue_beat(op);
}

int rlk_loop_queue_begin(rlk_loop_client *lc, rlk_loop_queue_op *op, const rlock_cancel *cancel)
{
    op->hb.fire = lq_on_heartbeat;
    int r = rlk_loop_due_add(lc);
    if (r != RLOCK_OK) {
        return r;
    }
    r = rlk_loop_lock_begin(lc, &op->l, cancel);
    if (r != RLOCK_OK) {
        rlk_loop_due_del(lc, &op->hb);
    }
    return r;
}

void rlk_loop_queue_complete(rlk_loop_wait *w, int rc)
{
    rlk_loop_due_del(w->base.lc, &rlk_loop_queue_of(w)->hb);
    rlk_loop_lock_complete(w, rc);
}

static void lq_on_leave(void *arg, redisReply *rep, int err)
{
    rlk_loop_queue_op *op = arg;
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        rlk_log(op->l.a.client, RLOCK_LOG_WARN,
                "%s '%s': could not leave (%s); the entry expires after waiter_timeout_ms",
                op->what, op->l.a.lock->name, err != RLOCK_OK ? rlock_last_error() : rep->str);
    }
    rlk_loop_wait_left(&op->l.w, err);
}

int rlk_loop_queue_leave(rlk_loop_wait *w, rlk_loop_leave_format format)
{
    rlk_loop_queue_op *op = rlk_loop_queue_of(w);
    rlk_loop_due_clear(w->base.lc, &op->hb);
    if (!op->queued) {
        return 0;
    }
    char *cmd = NULL;
    size_t len = 0;
    int script = 0;
    int r = format(op, &script, &cmd, &len);
    r = r ? r : rlk_loop_eval(w->base.lc, script, cmd, len, lq_on_leave, op);
    free(cmd);
    return r == RLOCK_OK;
}

int rlk_loop_queue_close_leave(rlk_loop_wait *w, rlk_loop_leave_format format)
{
    rlk_loop_queue_op *op = rlk_loop_queue_of(w);
    if (!op->queued || !rlk_loop_can_send_last(w->base.lc)) {
        return 0;
    }
    char *cmd = NULL;
    size_t len = 0;
    int script = 0;
    int r = format(op, &script, &cmd, &len);
    r = r ? r : rlk_loop_send_last(w->base.lc, script, cmd, len);
    free(cmd);
    return r == RLOCK_OK;
}
