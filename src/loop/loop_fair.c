/*
 * The fair lock on a loop client (loop_fair.h): the threaded fair lock's scripts and argument
 * builders (lock_fair.h) driven by loop callbacks. A loop waiter registers no direct grant: a
 * release or a grant ahead of it sends "0" on its own channel, as to a Redisson waiter, and its
 * next attempt takes the lock. While it is queued a loop timer runs fair_heartbeat.lua every
 * third of waiter_timeout_ms; a give-up sends fair_leave.lua and reports only after its reply,
 * and a free of the client queues the leave as its last request. Static helpers are named lf_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock_fair.h"
#include "lock_wait.h"
#include "loop_fair.h"
#include "loop_watchdog.h"

typedef struct lf_op {
    rlk_loop_op base;
    rlock *lock;
    rlk_acq a; /* owner, field, lease and wait id, as a blocking acquire keeps them */
    rlock_done_fn done;
    void *user_data;
    int64_t deadline; /* monotonic ms, INT64_MAX: none */
    void *timer;      /* the next attempt (wait bound or deadline) */
    void *hb_timer;   /* the heartbeat, armed while queued */
    int inflight;     /* an attempt or the leave is on its way */
    int rewake;       /* a notice came while an attempt was on its way: attempt again */
    int queued;       /* an attempt that may queue ran: the owner may be in the queue */
    int leaving;      /* the leave was sent; end_rc is reported after its reply */
    int end_rc;
    rlk_obs_wait obs;
} lf_op;

static void lf_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

/* Ends op: off every list, its timers freed, then done (which may free the handle). */
static void lf_complete(lf_op *op, int rc)
{
    rlk_loop_client *lc = op->base.lc;
    rlk_loop_hold *h = NULL;
    if (rc == RLOCK_OK) {
        h = rlk_loop_hold_get(lc, op->lock->name, op->lock->name_len, op->a.tid, 0);
    }
    (void)rlk_obs_acquire_end(op->a.client, &op->obs, op->lock->name, op->a.owner, rc,
                              h != NULL ? h->token : 0, h != NULL ? h->count : 0);
    rlk_loop_op_remove(&op->base);
    lc->loop.timer_free(op->timer);
    lc->loop.timer_free(op->hb_timer);
    rlock *lock = op->lock;
    rlock_done_fn done = op->done;
    void *user_data = op->user_data;
    free(op);
    done(lock, rc, user_data);
}

static void lf_on_reply(void *arg, redisReply *rep, int err);
static void lf_on_leave(void *arg, redisReply *rep, int err);

/* Formats and sends one script call of op's (fn NULL: no reply is read, for the free). */
static int lf_send(lf_op *op, int script, rlk_args *keys, rlk_args *args, rlk_lconn_reply_fn fn)
{
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(script, keys, args, &cmd, &len);
    if (r == RLOCK_OK && fn == NULL) {
        rlk_lconn *conn = op->base.lc->data;
        const rlk_script_src *s = rlk_script_get(script);
        const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->body};
        size_t lens[3] = {6, 4, s->len};
        r = rlk_lconn_command(conn, 3, argv, lens, NULL, NULL);
        r = r ? r : rlk_lconn_send(conn, cmd, len, NULL, NULL);
    } else if (r == RLOCK_OK) {
        r = rlk_loop_eval(op->base.lc, script, cmd, len, fn, op);
    }
    free(cmd);
    return r;
}

static int lf_attempt(lf_op *op)
{
    rlk_args keys, args;
    rlk_fair_attempt_args(&op->a, 0, 0, &keys, &args);
    int r = lf_send(op, RLK_SCRIPT_FAIR_ACQUIRE, &keys, &args, lf_on_reply);
    op->inflight = r == RLOCK_OK;
    op->queued |= r == RLOCK_OK && op->a.may_queue;
    return r;
}

/* The give-up: a queued waiter leaves the queue (and its channel) before done gets rc. */
static void lf_give_up(lf_op *op, int rc)
{
    rlk_loop_client *lc = op->base.lc;
    lc->loop.timer_stop(op->timer);
    lc->loop.timer_stop(op->hb_timer);
    rlk_loop_leave(&op->base);
    if (!op->queued) {
        lf_complete(op, rc);
        return;
    }
    rlk_args keys, args;
    rlk_fair_leave_args(&op->a, 0, &keys, &args);
    int r = lf_send(op, RLK_SCRIPT_FAIR_LEAVE, &keys, &args, lf_on_leave);
    if (r != RLOCK_OK) {
        lf_complete(op, rc);
        return;
    }
    op->inflight = op->leaving = 1;
    op->end_rc = rc;
}

static void lf_on_leave(void *arg, redisReply *rep, int err)
{
    lf_op *op = arg;
    op->inflight = 0;
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        rlk_log(op->a.client, RLOCK_LOG_WARN,
                "fair lock '%s': could not leave the queue (%s); the entry expires after "
                "waiter_timeout_ms",
                op->lock->name, err != RLOCK_OK ? rlock_last_error() : rep->str);
    }
    lf_complete(op, err == RLOCK_ECLOSED ? err : op->end_rc);
}

static void lf_retry(lf_op *op)
{
    op->rewake = 0;
    op->base.lc->loop.timer_stop(op->timer);
    int r = lf_attempt(op);
    if (r != RLOCK_OK) {
        lf_give_up(op, r);
    }
}

/* Sleeps until a message, the wait bound of the reply (the holder's lease, or the first
 * waiter's deadline) or the deadline; with no bound, the subscription timeout. */
static void lf_sleep(lf_op *op)
{
    int64_t now = rlk_now_ms();
    int64_t ttl = op->a.ttl_ms > 0 ? op->a.ttl_ms : op->a.client->opts.subscription_timeout_ms;
    int64_t until = rlk_add_sat(now, ttl);
    until = until < op->deadline ? until : op->deadline;
    (void)op->base.lc->loop.timer_start(op->timer, until - now);
}

/* The lock is busy (the owner queued, if it may): give up, or join its channel, or sleep. */
static void lf_busy(lf_op *op)
{
    if (rlk_cancel_is_fired(op->base.cancel)) {
        lf_give_up(
            op, rlk_err(RLOCK_ECANCELED, "fair lock '%s': the wait was cancelled", op->lock->name));
        return;
    }
    if (rlk_now_ms() >= op->deadline) {
        lf_give_up(op, RLOCK_ETIMEDOUT);
        return;
    }
    if (op->base.chan != NULL && op->rewake) {
        lf_retry(op); /* the notice may be newer than the attempt's reply */
        return;
    }
    if (op->base.chan != NULL) {
        lf_sleep(op);
        return;
    }
    int64_t beat = op->a.client->opts.waiter_timeout_ms / 3;
    (void)op->base.lc->loop.timer_start(op->hb_timer, beat > 0 ? beat : 1);
    rlk_buf ch;
    rlk_buf_init(&ch);
    int r = op->lock->single->channel(&op->a, &ch);
    r = r ? r : rlk_loop_join(&op->base, ch.p, ch.len);
    rlk_buf_free(&ch);
    if (r < 0) {
        lf_give_up(op, r);
    } else if (r == 1) {
        lf_retry(op); /* listening already: a notice before the join is seen by this attempt */
    } else {
        lf_sleep(op); /* until RLK_LOOP_SUBSCRIBED */
    }
}

static void lf_on_reply(void *arg, redisReply *rep, int err)
{
    lf_op *op = arg;
    op->inflight = 0;
    int r = err;
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "fair lock '%s': %s", op->lock->name, rep->str);
    }
    int joined = 0;
    r = r ? r : rlk_fair_attempt_reply(&op->a, rep, &joined);
    if (r == 1) {
        lf_complete(op, rlk_loop_hold_grant(op->base.lc, op->lock, &op->a));
    } else if (r == 0) {
        lf_busy(op);
    } else if (r == RLOCK_ECLOSED) {
        lf_complete(op, r); /* the free queued the leave (lf_closing) */
    } else {
        lf_give_up(op, r);
    }
}

/* The heartbeat: the waiter's deadline moves on; a waiter no longer queued is sent "0" by the
 * script, and its next attempt joins again, so the reply is not needed. */
static void lf_on_heartbeat(void *arg)
{
    lf_op *op = arg;
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, op->lock->name, op->lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, op->a.client->opts.waiter_timeout_ms);
    rlk_args_add(&args, op->a.owner, op->a.owner_len);
    char *cmd = NULL;
    size_t len = 0;
    /* One that cannot be sent is made up by the next: the entry lives three beats. */
    if (rlk_script_format(RLK_SCRIPT_FAIR_HEARTBEAT, &keys, &args, &cmd, &len) == RLOCK_OK) {
        (void)rlk_loop_eval(op->base.lc, RLK_SCRIPT_FAIR_HEARTBEAT, cmd, len, lf_ignore, NULL);
    }
    free(cmd);
    int64_t beat = op->a.client->opts.waiter_timeout_ms / 3;
    (void)op->base.lc->loop.timer_start(op->hb_timer, beat > 0 ? beat : 1);
}

static void lf_wake(rlk_loop_op *base, int why)
{
    lf_op *op = RLK_CONTAINER_OF(base, lf_op, base);
    if (why == RLK_LOOP_CLOSE) {
        lf_complete(op,
                    rlk_err(RLOCK_ECLOSED, "fair lock '%s': the client was freed", op->lock->name));
    } else if (op->inflight) {
        op->rewake |= why != RLK_LOOP_CANCEL; /* the reply decides, a cancellation included */
    } else if (why == RLK_LOOP_CANCEL) {
        lf_busy(op);
    } else {
        lf_retry(op);
    }
}

/* The client is being freed: a queued waiter that is not leaving yet queues its leave as the
 * connection's last request (SCRIPT LOAD first: no NOSCRIPT reply is read any more). */
static int lf_closing(rlk_loop_op *base)
{
    lf_op *op = RLK_CONTAINER_OF(base, lf_op, base);
    if (!op->queued || op->leaving || !rlk_lconn_ok(base->lc->data)) {
        return 0;
    }
    rlk_args keys, args;
    rlk_fair_leave_args(&op->a, 0, &keys, &args);
    op->leaving = lf_send(op, RLK_SCRIPT_FAIR_LEAVE, &keys, &args, NULL) == RLOCK_OK;
    return op->leaving;
}

static void lf_on_timer(void *arg)
{
    lf_op *op = arg;
    if (!op->inflight) {
        lf_retry(op);
    }
}

static void lf_free(lf_op *op)
{
    rlk_loop_client *lc = op->base.lc;
    if (op->timer != NULL) {
        lc->loop.timer_free(op->timer);
    }
    if (op->hb_timer != NULL) {
        lc->loop.timer_free(op->hb_timer);
    }
    free(op);
}

int rlk_loop_fair_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data)
{
    lf_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    *op = (lf_op){.lock = lock, .done = done, .user_data = user_data, .deadline = INT64_MAX};
    op->base.lc = lc;
    if (args->wait_ms != RLOCK_WAIT_FOREVER) {
        op->deadline = rlk_add_sat(rlk_now_ms(), args->wait_ms);
    }
    rlk_call_ctx saved;
    rlk_call_enter(tid, NULL, &saved);
    rlk_acq_init(&op->a, lock);
    rlk_call_leave(&saved);
    op->a.watchdog = args->lease_ms < 0;
    op->a.lease_ms = op->a.watchdog ? lock->client->opts.watchdog_timeout_ms : args->lease_ms;
    op->a.wait_ms = args->wait_ms;
    op->a.may_queue = args->wait_ms != 0;
    op->a.wait_id = rlk_wait_id_next();
    op->timer = lc->loop.timer_new(lc->loop.loop_data, lf_on_timer, op);
    op->hb_timer = lc->loop.timer_new(lc->loop.loop_data, lf_on_heartbeat, op);
    int r = op->timer != NULL && op->hb_timer != NULL
                ? rlk_loop_op_add(lc, &op->base, args->cancel, lf_wake)
                : rlk_err(RLOCK_ENOMEM, "rlock_lock_async: the loop gave no timer");
    op->base.closing = lf_closing;
    if (r == RLOCK_OK && (r = lf_attempt(op)) != RLOCK_OK) {
        rlk_loop_op_remove(&op->base);
    }
    if (r != RLOCK_OK) {
        lf_free(op);
        return r;
    }
    rlk_obs_acquire_begin(lock->client, &op->obs, rlk_obs_kind_of(RLOCK_FAIR), lock->name,
                          op->a.owner);
    return RLOCK_OK;
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
    r = r ? r : rlk_loop_eval(lc, RLK_SCRIPT_FAIR_RELEASE, cmd, len, fn, arg);
    free(cmd);
    return r;
}
