/*
 * The fair lock on a loop client (loop_fair.h): the threaded fair lock's scripts and argument
 * builders (lock_fair.h) as the table of a lock's waiting operation (loop_lock_wait.h,
 * loop_wait.h). A loop waiter registers no direct grant: a release or a grant ahead of it sends "0"
 * on its own channel, as to a Redisson waiter, and its next attempt takes the lock. While it is
 * queued a loop timer runs fair_heartbeat.lua every third of waiter_timeout_ms; a give-up sends
 * fair_leave.lua and reports only after its reply, and a free of the client queues the leave as
 * its last request. Static helpers are named lf_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock_fair.h"
#include "lock_wait.h"
#include "loop_fair.h"
#include "loop_sync.h"
#include "loop_lock_wait.h"

typedef struct lf_op {
    rlk_loop_lock_op l; /* first: the lock's completion frees the record through it */
    rlk_loop_due hb;    /* the heartbeat, set while queued */
    int queued;         /* an attempt that may queue ran: the owner may be in the queue */
} lf_op;

static void lf_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

static lf_op *lf_of(rlk_loop_wait *w)
{
    return RLK_CONTAINER_OF(RLK_CONTAINER_OF(w, rlk_loop_lock_op, w), lf_op, l);
}

static void lf_complete(rlk_loop_wait *w, int rc)
{
    rlk_loop_due_del(w->base.lc, &lf_of(w)->hb);
    rlk_loop_lock_complete(w, rc);
}

/* Formats and sends one script call of op's (fn NULL: no reply is read, for the free). */
static int lf_send(lf_op *op, int script, rlk_args *keys, rlk_args *args, rlk_lconn_reply_fn fn)
{
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(script, keys, args, &cmd, &len);
    if (r == RLOCK_OK && fn == NULL) {
        r = rlk_loop_send_last(op->l.w.base.lc, script, cmd, len);
    } else if (r == RLOCK_OK && script == RLK_SCRIPT_FAIR_ACQUIRE) {
        r = rlk_loop_eval_synced(op->l.w.base.lc, script, cmd, len, fn, op);
    } else if (r == RLOCK_OK) {
        r = rlk_loop_eval(op->l.w.base.lc, script, cmd, len, fn, op);
    }
    free(cmd);
    return r;
}

static int lf_decode(rlk_loop_lock_op *l, redisReply *rep)
{
    int joined = 0;
    return rlk_fair_attempt_reply(&l->a, rep, &joined);
}

static void lf_on_reply(void *arg, redisReply *rep, int err)
{
    lf_op *op = arg;
    rlk_loop_lock_result(&op->l, rep, err, lf_decode);
}

static int lf_attempt(rlk_loop_wait *w)
{
    lf_op *op = lf_of(w);
    rlk_args keys, args;
    rlk_fair_attempt_args(&op->l.a, 0, 0, &keys, &args);
    int r = lf_send(op, RLK_SCRIPT_FAIR_ACQUIRE, &keys, &args, lf_on_reply);
    op->queued |= r == RLOCK_OK && op->l.a.may_queue;
    return r;
}

static void lf_on_leave(void *arg, redisReply *rep, int err)
{
    lf_op *op = arg;
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        rlk_log(op->l.a.client, RLOCK_LOG_WARN,
                "fair lock '%s': could not leave the queue (%s); the entry expires after "
                "waiter_timeout_ms",
                op->l.lock->name, err != RLOCK_OK ? rlock_last_error() : rep->str);
    }
    rlk_loop_wait_left(&op->l.w, err);
}

/* The give-up: the heartbeat stops, and a queued waiter leaves the queue before done runs. */
static int lf_leave(rlk_loop_wait *w)
{
    lf_op *op = lf_of(w);
    rlk_loop_due_clear(w->base.lc, &op->hb);
    if (!op->queued) {
        return 0;
    }
    rlk_args keys, args;
    rlk_fair_leave_args(&op->l.a, 0, &keys, &args);
    return lf_send(op, RLK_SCRIPT_FAIR_LEAVE, &keys, &args, lf_on_leave) == RLOCK_OK;
}

/* The client is being freed: a queued waiter queues its leave as the connection's last request
 * (SCRIPT LOAD first: no NOSCRIPT reply is read any more). */
static int lf_close_leave(rlk_loop_wait *w)
{
    lf_op *op = lf_of(w);
    if (!op->queued || !rlk_loop_can_send_last(w->base.lc)) {
        return 0;
    }
    rlk_args keys, args;
    rlk_fair_leave_args(&op->l.a, 0, &keys, &args);
    return lf_send(op, RLK_SCRIPT_FAIR_LEAVE, &keys, &args, NULL) == RLOCK_OK;
}

static void lf_beat_later(lf_op *op)
{
    int64_t beat = op->l.a.client->opts.waiter_timeout_ms / 3;
    rlk_loop_due_set(op->l.w.base.lc, &op->hb, beat > 0 ? beat : 1);
}

/* The first busy reply queued the owner: its heartbeat starts with its wait on the channel. */
static int lf_join(rlk_loop_wait *w)
{
    lf_beat_later(lf_of(w));
    return rlk_loop_lock_join(w);
}

/* The heartbeat: the waiter's deadline moves on; a waiter no longer queued is sent "0" by the
 * script, and its next attempt joins again, so the reply is not needed. */
static void lf_on_heartbeat(rlk_loop_due *due)
{
    lf_op *op = RLK_CONTAINER_OF(due, lf_op, hb);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, op->l.lock->name, op->l.lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, op->l.a.client->opts.waiter_timeout_ms);
    rlk_args_add(&args, op->l.a.owner, op->l.a.owner_len);
    char *cmd = NULL;
    size_t len = 0;
    /* One that cannot be sent is made up by the next: the entry lives three beats. */
    if (rlk_script_format(RLK_SCRIPT_FAIR_HEARTBEAT, &keys, &args, &cmd, &len) == RLOCK_OK) {
        (void)rlk_loop_eval(op->l.w.base.lc, RLK_SCRIPT_FAIR_HEARTBEAT, cmd, len, lf_ignore, NULL);
    }
    free(cmd);
    lf_beat_later(op);
}

static const rlk_loop_wait_ops lf_ops = {
    .attempt = lf_attempt,
    .join = lf_join,
    .say = rlk_loop_lock_say,
    .complete = lf_complete,
    .leave = lf_leave,
    .close_leave = lf_close_leave,
};

/* Gives back a grant fewer replicas acknowledged (loop_lock_wait.c): the fair release, which
 * passes the lock on to the queue's next. */
static int lf_give_back(rlk_loop_lock_op *l, rlk_lconn_reply_fn fn)
{
    return rlk_loop_fair_release(l->w.base.lc, &l->a, l->a.lease_ms, fn, l);
}

int rlk_loop_fair_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data)
{
    lf_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(&op->l, lock, tid, args, done, user_data);
    op->l.w.ops = &lf_ops;
    op->l.give_back = lf_give_back;
    op->l.a.may_queue = args->wait_ms != 0;
    op->l.a.wait_id = rlk_wait_id_next();
    op->hb.fire = lf_on_heartbeat;
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

int rlk_loop_fair_release(rlk_loop_client *lc, rlk_acq *a, int64_t lease_ms, rlk_lconn_reply_fn fn,
                          void *arg)
{
    rlk_args keys, args;
    a->lease_ms = lease_ms;
    rlk_fair_release_args(a, &keys, &args);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(RLK_SCRIPT_FAIR_RELEASE, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(lc, RLK_SCRIPT_FAIR_RELEASE, cmd, len, fn, arg);
    free(cmd);
    return r;
}
