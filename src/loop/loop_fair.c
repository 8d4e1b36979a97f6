/*
 * The fair lock on a loop client (loop_fair.h): the threaded fair lock's scripts and argument
 * builders (lock_fair.h) as the table of a lock's waiting operation (loop_lock_wait.h,
 * loop_wait.h). A loop waiter registers no direct grant: a release or a grant ahead of it sends "0"
 * on its own channel, as to a Redisson waiter, and its next attempt takes the lock. While it is
 * queued it is a recorded waiter (loop_queue.h): fair_heartbeat.lua keeps its entry, a give-up
 * sends fair_leave.lua and reports only after its reply, and a free of the client queues the
 * leave as its last request. Static helpers are named lf_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock_fair.h"
#include "lock_wait.h"
#include "loop_fair.h"
#include "loop_sync.h"
#include "loop_queue.h"

static int lf_decode(rlk_loop_lock_op *l, redisReply *rep)
{
    int joined = 0;
    return rlk_fair_attempt_reply(&l->a, rep, &joined);
}

static void lf_on_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_queue_op *op = arg;
    rlk_loop_lock_result(&op->l, rep, err, lf_decode);
}

static int lf_attempt(rlk_loop_wait *w)
{
    rlk_loop_queue_op *op = rlk_loop_queue_of(w);
    rlk_args keys, args;
    rlk_fair_attempt_args(&op->l.a, 0, 0, &keys, &args);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(RLK_SCRIPT_FAIR_ACQUIRE, &keys, &args, &cmd, &len);
    r = r ? r
          : rlk_loop_eval_synced(w->base.lc, RLK_SCRIPT_FAIR_ACQUIRE, cmd, len, lf_on_reply, op);
    free(cmd);
    op->queued |= r == RLOCK_OK && op->l.a.may_queue;
    return r;
}

static int lf_leave_format(rlk_loop_queue_op *op, int *script, char **cmd, size_t *len)
{
    rlk_args keys, args;
    rlk_fair_leave_args(&op->l.a, 0, &keys, &args);
    *script = RLK_SCRIPT_FAIR_LEAVE;
    return rlk_script_format(RLK_SCRIPT_FAIR_LEAVE, &keys, &args, cmd, len);
}

/* The give-up: the heartbeat stops, and a queued waiter leaves the queue before done runs. */
static int lf_leave(rlk_loop_wait *w)
{
    return rlk_loop_queue_leave(w, lf_leave_format);
}

/* The client is being freed: a queued waiter queues its leave as the connection's last request. */
static int lf_close_leave(rlk_loop_wait *w)
{
    return rlk_loop_queue_close_leave(w, lf_leave_format);
}

/* The first busy reply queued the owner: its heartbeat starts with its wait on the channel. */
static int lf_join(rlk_loop_wait *w)
{
    rlk_loop_queue_beat(rlk_loop_queue_of(w));
    return rlk_loop_lock_join(w);
}

/* Gives back a grant fewer replicas acknowledged (loop_lock_wait.c): the fair release, which
 * passes the lock on to the queue's next. */
static int lf_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn)
{
    rlk_loop_lock_op *l = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    return rlk_loop_fair_release(l->w.base.lc, &l->a, l->a.lease_ms, fn, l);
}

static const rlk_loop_wait_ops lf_ops = {
    .attempt = lf_attempt,
    .join = lf_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_queue_complete,
    .leave = lf_leave,
    .close_leave = lf_close_leave,
    .give_back = lf_give_back,
};

int rlk_loop_fair_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data)
{
    rlk_loop_queue_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(&op->l, lock, tid, args, done, user_data);
    op->l.w.ops = &lf_ops;
    op->l.a.may_queue = args->wait_ms != 0;
    op->l.a.wait_id = rlk_wait_id_next();
    op->hb_script = RLK_SCRIPT_FAIR_HEARTBEAT;
    op->what = "fair lock";
    int r = rlk_loop_queue_begin(lc, op, args->cancel);
    if (r != RLOCK_OK) {
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
