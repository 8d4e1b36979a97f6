/*
 * Asynchronous acquire and release of a reentrant lock on a loop client (loop_lock.h). An
 * operation is never completed while a request of its own is in flight, except by that
 * request's reply: so a cancellation that finds an attempt on its way waits for it, and a grant
 * in that reply is reported as RLOCK_OK (nothing is held unreported). Static helpers are named
 * lop_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "loop_fair.h"
#include "loop_lock.h"
#include "loop_watchdog.h"
#include "owner.h"
#include "release_reply.h"

typedef struct lop {
    rlk_loop_op base;
    rlock *lock;
    rlk_acq a; /* the owner's identity, field and lease, as a blocking acquire keeps them */
    rlock_done_fn done;
    void *user_data;
    int64_t deadline; /* monotonic ms, INT64_MAX: none */
    void *timer;
    int inflight;     /* an attempt is on its way */
    int woken;        /* a message or confirmation came while it was: attempt again at once */
    rlk_obs_wait obs; /* the acquire as the observation core counts it (base/observe.h) */
} lop;

/* Ends op: off every list, its timer freed, then done (which may start other operations or
 * free the handle: op is gone by then). */
static void lop_complete(lop *op, int rc)
{
    rlk_loop_hold *h = NULL;
    if (rc == RLOCK_OK) {
        h = rlk_loop_hold_get(op->base.lc, op->lock->name, op->lock->name_len, op->a.tid, 0);
    }
    (void)rlk_obs_acquire_end(op->a.client, &op->obs, op->lock->name, op->a.owner, rc,
                              h != NULL ? h->token : 0, h != NULL ? h->count : 0);
    rlk_loop_op_remove(&op->base);
    op->base.lc->loop.timer_free(op->timer);
    rlock *lock = op->lock;
    rlock_done_fn done = op->done;
    void *user_data = op->user_data;
    free(op);
    done(lock, rc, user_data);
}

static void lop_on_reply(void *arg, redisReply *rep, int err);

static int lop_attempt(lop *op)
{
    char *cmd = NULL;
    size_t len = 0;
    int r = op->lock->single->attempt_format(&op->a, &cmd, &len);
    r = r ? r : rlk_loop_eval(op->base.lc, RLK_SCRIPT_LOCK_ACQUIRE, cmd, len, lop_on_reply, op);
    free(cmd);
    op->inflight = r == RLOCK_OK;
    return r;
}

/* Sleeps until a message, the holder's TTL (a lease that ran out sends no message) or the
 * deadline; a wait with neither is still bounded, by the subscription timeout, so that a lost
 * subscription costs a poll, not a hang. */
static void lop_sleep(lop *op)
{
    int64_t now = rlk_now_ms();
    int64_t ttl = op->a.ttl_ms > 0 ? op->a.ttl_ms : op->a.client->opts.subscription_timeout_ms;
    int64_t until = rlk_add_sat(now, ttl);
    until = until < op->deadline ? until : op->deadline;
    (void)op->base.lc->loop.timer_start(op->timer, until - now);
}

static void lop_retry(lop *op)
{
    op->base.lc->loop.timer_stop(op->timer);
    int r = lop_attempt(op);
    if (r != RLOCK_OK) {
        lop_complete(op, r);
    }
}

/* The lock is busy: give up, or join the channel, or sleep. */
static void lop_busy(lop *op)
{
    if (rlk_cancel_is_fired(op->base.cancel)) {
        lop_complete(op,
                     rlk_err(RLOCK_ECANCELED, "lock '%s': the wait was cancelled", op->lock->name));
        return;
    }
    if (rlk_now_ms() >= op->deadline) {
        lop_complete(op, RLOCK_ETIMEDOUT);
        return;
    }
    if (op->base.chan != NULL && op->woken) {
        op->woken = 0; /* the release it announced may have followed that attempt on Redis */
        lop_retry(op);
        return;
    }
    if (op->base.chan != NULL) {
        lop_sleep(op);
        return;
    }
    rlk_buf ch;
    rlk_buf_init(&ch);
    int r = op->lock->single->channel(&op->a, &ch);
    r = r ? r : rlk_loop_join(&op->base, ch.p, ch.len);
    rlk_buf_free(&ch);
    if (r < 0) {
        lop_complete(op, r);
    } else if (r == 1) {
        lop_retry(op); /* listening already: a release before the join is seen by this attempt */
    } else {
        lop_sleep(op); /* until RLK_LOOP_SUBSCRIBED */
    }
}

static void lop_on_reply(void *arg, redisReply *rep, int err)
{
    lop *op = arg;
    op->inflight = 0;
    int r = err;
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "lock '%s': %s", op->lock->name, rep->str);
    }
    r = r ? r : op->lock->single->attempt_reply(&op->a, rep);
    if (r == 1) {
        lop_complete(op, rlk_loop_hold_grant(op->base.lc, op->lock, &op->a));
    } else if (r == 0) {
        lop_busy(op);
    } else {
        lop_complete(op, r);
    }
}

static void lop_wake(rlk_loop_op *base, int why)
{
    lop *op = RLK_CONTAINER_OF(base, lop, base);
    if (why == RLK_LOOP_CLOSE) {
        lop_complete(op, rlk_err(RLOCK_ECLOSED, "lock '%s': the client was freed", op->lock->name));
    } else if (op->inflight) {
        op->woken |= why != RLK_LOOP_CANCEL;
        return; /* the reply decides, a cancellation included */
    } else if (why == RLK_LOOP_CANCEL) {
        lop_busy(op);
    } else {
        lop_retry(op);
    }
}

static void lop_on_timer(void *arg)
{
    lop *op = arg;
    if (!op->inflight) {
        lop_retry(op);
    }
}

/* The checks of rlock_lock_async() that need no allocation; *lc and *tid on success. */
static int lop_check(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                     rlk_loop_client **lc, uint64_t *tid)
{
    if (lock == NULL || args == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_async: lock, args and done must not be NULL");
    }
    for (size_t i = 0; i < sizeof(args->reserved) / sizeof(args->reserved[0]); i++) {
        if (args->reserved[i] != NULL) {
            return rlk_err(RLOCK_EINVAL, "rlock_lock_async: reserved fields must be NULL");
        }
    }
    if (lock->ops->group || (lock->kind != RLOCK_REENTRANT && lock->kind != RLOCK_FAIR)) {
        return rlk_err(RLOCK_ENOTSUP, "rlock_lock_async serves RLOCK_REENTRANT and RLOCK_FAIR "
                                      "handles only");
    }
    int r = rlk_client_check(lock->client);
    if (r == RLOCK_OK && (*lc = rlk_loop_of(lock->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async needs a loop client (rlock_async.h)");
    }
    if (r == RLOCK_OK && ((args->wait_ms < 0 && args->wait_ms != RLOCK_WAIT_FOREVER) ||
                          args->lease_ms == 0 || args->lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async: bad wait_ms or lease_ms");
    }
    if (r == RLOCK_OK && args->on_lost != NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async: on_lost is not served on loop clients yet");
    }
    r = r ? r : rlk_owner_tid(args->owner, lock->client, "rlock_lock_async", tid);
    return r ? r : rlk_cancel_check(args->cancel, "lock", lock->name);
}

RLOCK_EXPORT int rlock_lock_async(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                                  void *user_data)
{
    rlk_loop_client *lc = NULL;
    uint64_t tid = 0;
    int r = lop_check(lock, args, done, &lc, &tid);
    if (r != RLOCK_OK || lc == NULL) {
        return r != RLOCK_OK ? r : RLOCK_EINVAL;
    }
    if (lock->kind == RLOCK_FAIR) {
        return rlk_loop_fair_lock(lc, lock, tid, args, done, user_data);
    }
    lop *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    *op = (lop){.lock = lock, .done = done, .user_data = user_data, .deadline = INT64_MAX};
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
    op->timer = lc->loop.timer_new(lc->loop.loop_data, lop_on_timer, op);
    r = op->timer != NULL ? rlk_loop_op_add(lc, &op->base, args->cancel, lop_wake)
                          : rlk_err(RLOCK_ENOMEM, "rlock_lock_async: the loop gave no timer");
    if (r == RLOCK_OK && (r = lop_attempt(op)) != RLOCK_OK) {
        rlk_loop_op_remove(&op->base);
    }
    if (r == RLOCK_OK) {
        rlk_obs_acquire_begin(lock->client, &op->obs, rlk_obs_kind_of(RLOCK_REENTRANT), lock->name,
                              op->a.owner);
    }
    if (r != RLOCK_OK) {
        if (op->timer != NULL) {
            lc->loop.timer_free(op->timer);
        }
        free(op);
    }
    return r;
}

/* ---- release --------------------------------------------------------------------------- */

typedef struct lop_unlock {
    rlk_loop_client *lc;
    rlock *lock;
    uint64_t tid;
    char owner[RLK_OWNER_MAX];
    rlock_done_fn done;
    void *user_data;
} lop_unlock;

static void lop_unlock_reply(void *arg, redisReply *rep, int err)
{
    lop_unlock *u = arg;
    long long v = 0;
    int r = err;
    if (r == RLOCK_OK) {
        r = rlk_notify_reply(u->lock->client, rep, &v, "lock_release");
    }
    rlk_loop_hold *h = NULL;
    if (r != RLOCK_ECLOSED) { /* after the free the records are gone */
        h = rlk_loop_hold_get(u->lc, u->lock->name, u->lock->name_len, u->tid, 0);
    }
    if (r == RLOCK_OK && v < 0) {
        r = h != NULL && h->lost
                ? rlk_err(RLOCK_ELOST, "lock '%s': the hold was lost while held", u->lock->name)
                : rlk_err(RLOCK_ENOTOWNER, "lock '%s': the owner holds nothing", u->lock->name);
    }
    if (h != NULL) {
        int full = r == RLOCK_OK && (v == 1 || --h->count <= 0);
        if (full) {
            rlk_obs_release(u->lock->client, h->kind, h->name, u->owner, h->obs_t0, h->token);
        }
        if (r == RLOCK_ENOTOWNER || r == RLOCK_ELOST || full) {
            rlk_loop_hold_drop(u->lc, h);
        }
    }
    rlock *lock = u->lock;
    rlock_done_fn done = u->done;
    void *user_data = u->user_data;
    free(u);
    done(lock, r, user_data);
}

/* The release's call: lock_release.lua with the lock's channel, waiters zset and wake prefix,
 * so a waiting rlock thread is named and a Redisson waiter gets "0"; no grant keys (a loop
 * release wakes, it does not grant). */
static int lop_unlock_send(lop_unlock *u, rlk_acq *a, int64_t lease_ms)
{
    static const char *const prefixes[3] = {"redisson_lock__channel", "rlock_lock_waiters",
                                            "rlock_lock_wake"};
    rlock *l = u->lock;
    rlk_buf names[3];
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    int r = RLOCK_OK;
    for (int i = 0; i < 3; i++) {
        rlk_buf_init(&names[i]);
        r = r ? r : rlk_prefix_name(&names[i], prefixes[i], l->name, l->name_len);
        rlk_args_add(&keys, names[i].p, names[i].len);
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_adds(&args, "0");
    char *cmd = NULL;
    size_t len = 0;
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_RELEASE, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval(u->lc, RLK_SCRIPT_LOCK_RELEASE, cmd, len, lop_unlock_reply, u);
    free(cmd);
    for (int i = 0; i < 3; i++) {
        rlk_buf_free(&names[i]);
    }
    return r;
}

RLOCK_EXPORT int rlock_unlock_async(rlock *lock, rlock_owner *owner, rlock_done_fn done,
                                    void *user_data)
{
    if (lock == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_unlock_async: lock and done must not be NULL");
    }
    if (lock->ops->group || (lock->kind != RLOCK_REENTRANT && lock->kind != RLOCK_FAIR)) {
        return rlk_err(RLOCK_ENOTSUP, "rlock_unlock_async serves RLOCK_REENTRANT and RLOCK_FAIR "
                                      "handles only");
    }
    rlk_loop_client *lc = NULL;
    uint64_t tid = 0;
    int r = rlk_client_check(lock->client);
    if (r == RLOCK_OK && (lc = rlk_loop_of(lock->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_unlock_async needs a loop client (rlock_async.h)");
    }
    r = r ? r : rlk_owner_tid(owner, lock->client, "rlock_unlock_async", &tid);
    lop_unlock *u = r == RLOCK_OK ? calloc(1, sizeof(*u)) : NULL;
    if (r == RLOCK_OK && u == NULL) {
        r = rlk_err(RLOCK_ENOMEM, "rlock_unlock_async: out of memory");
    }
    if (r != RLOCK_OK || u == NULL || lc == NULL) {
        free(u);
        return r != RLOCK_OK ? r : RLOCK_ENOMEM;
    }
    *u = (lop_unlock){.lc = lc, .lock = lock, .tid = tid, .done = done, .user_data = user_data};
    rlk_acq a;
    rlk_call_ctx saved;
    rlk_call_enter(tid, NULL, &saved);
    rlk_acq_init(&a, lock);
    rlk_call_leave(&saved);
    memcpy(u->owner, a.owner, a.owner_len + 1);
    rlk_loop_hold *h = rlk_loop_hold_get(lc, lock->name, lock->name_len, tid, 0);
    int64_t lease = h != NULL ? h->lease_ms : lock->client->opts.watchdog_timeout_ms;
    r = lock->kind == RLOCK_FAIR ? rlk_loop_fair_release(lc, &a, lease, lop_unlock_reply, u)
                                 : lop_unlock_send(u, &a, lease);
    if (r != RLOCK_OK) {
        free(u);
    }
    return r;
}
