/*
 * Asynchronous acquire and release of a lock on a loop client (loop_lock.h): the argument
 * checks, the dispatch of fair, read-write and spin handles (loop_fair.c, loop_rw.c,
 * loop_spin.c), the reentrant attempt as the table of a lock's waiting operation
 * (loop_lock_wait.h), and the release of every kind. Static helpers are
 * named lop_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "loop_fair.h"
#include "loop_group.h"
#include "loop_lock.h"
#include "loop_lock_wait.h"
#include "loop_rw.h"
#include "loop_spin.h"
#include "loop_sync.h"
#include "loop_watchdog.h"
#include "owner.h"
#include "release_reply.h"
#include "replica.h"

static int lop_decode(rlk_loop_lock_op *op, redisReply *rep)
{
    return op->a.lock->single->attempt_reply(&op->a, rep);
}

static void lop_on_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_lock_result(arg, rep, err, lop_decode);
}

static int lop_attempt(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    int r = op->a.lock->single->attempt_format(&op->a, &cmd, &len);
    r = r ? r
          : rlk_loop_eval_synced(w->base.lc, RLK_SCRIPT_LOCK_ACQUIRE, cmd, len, lop_on_reply, op);
    free(cmd);
    return r;
}

static const rlk_loop_wait_ops lop_ops = {
    .attempt = lop_attempt,
    .join = rlk_loop_lock_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_lock_complete,
    .give_back = rlk_loop_reentrant_give_back,
};

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
    int r = rlk_client_check(lock->client);
    if (r == RLOCK_OK && (*lc = rlk_loop_of(lock->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async needs a loop client (rlock_async.h)");
    }
    if (r == RLOCK_OK && ((args->wait_ms < 0 && args->wait_ms != RLOCK_WAIT_FOREVER) ||
                          args->lease_ms == 0 || args->lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "rlock_lock_async: bad wait_ms or lease_ms");
    }
    r = r ? r : rlk_owner_tid(args->owner, lock->client, "rlock_lock_async", tid);
    return r ? r : rlk_cancel_check(args->cancel, "lock", lock->name);
}

RLOCK_EXPORT int rlock_lock_async(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                                  void *user_data)
{
    if (lock != NULL && lock->ops->group) {
        return rlk_loop_group_lock(lock, args, done, user_data);
    }
    rlk_loop_client *lc = NULL;
    uint64_t tid = 0;
    int r = lop_check(lock, args, done, &lc, &tid);
    if (r != RLOCK_OK || lc == NULL) {
        return r != RLOCK_OK ? r : RLOCK_EINVAL;
    }
    return rlk_loop_lock_start(lc, lock, tid, args, done, user_data);
}

int rlk_loop_lock_start(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                        rlock_done_fn done, void *user_data)
{
    int r = RLOCK_OK;
    if (lock->kind == RLOCK_FAIR) {
        return rlk_loop_fair_lock(lc, lock, tid, args, done, user_data);
    }
    if (lock->kind == RLOCK_READ || lock->kind == RLOCK_WRITE) {
        return rlk_loop_rw_lock(lc, lock, tid, args, done, user_data);
    }
    if (lock->kind == RLOCK_SPIN) {
        return rlk_loop_spin_lock(lc, lock, tid, args, done, user_data);
    }
    rlk_loop_lock_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(op, lock, tid, args, done, user_data);
    op->w.ops = &lop_ops;
    r = rlk_loop_lock_begin(lc, op, args->cancel);
    if (r != RLOCK_OK) {
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

/* A release fewer replicas acknowledged: done, with a WARN, when the node released; when it
 * said "not held" of a hold the client records, not believed (a master restarted empty says so
 * of a hold that still stands on the promoted replica): RLOCK_EREPLICA, and the record stays, as
 * for a threaded unlock. */
static int lop_unlock_short(const lop_unlock *u, const rlk_loop_hold *h, long long v, int acked,
                            int n)
{
    if (v < 0 && h != NULL && !h->lost) {
        return rlk_err(RLOCK_EREPLICA,
                       "unlock of '%s': the node says it is not held, but %d of %d replicas "
                       "acknowledged; the outcome is unknown, retry",
                       u->lock->name, acked, n);
    }
    rlk_log(u->lock->client, RLOCK_LOG_WARN,
            "unlock of '%s': %d of %d replicas acknowledged the release", u->lock->name, acked, n);
    return RLOCK_OK;
}

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
        h = rlk_loop_hold_get(u->lc, u->lock->name, u->lock->name_len, u->tid,
                              rlk_loop_hold_side(u->lock), 0);
    }
    int acked = 0, n = 0;
    if (r == RLOCK_OK && rlk_sync_short(&acked, &n)) {
        r = lop_unlock_short(u, h, v, acked, n);
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

/* The release's request: lock_release.lua with the lock's channel, waiters zset and wake
 * prefix, so a waiting rlock thread is named and a Redisson waiter gets "0"; no grant keys (a
 * loop release wakes, it does not grant). */
static int lop_release_format(rlock *l, rlk_acq *a, int64_t lease_ms, char **cmd, size_t *len)
{
    static const char *const prefixes[3] = {"redisson_lock__channel", "rlock_lock_waiters",
                                            "rlock_lock_wake"};
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
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_RELEASE, &keys, &args, cmd, len);
    for (int i = 0; i < 3; i++) {
        rlk_buf_free(&names[i]);
    }
    return r;
}

int rlk_loop_reentrant_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    int r = lop_release_format(op->a.lock, &op->a, op->a.lease_ms, &cmd, &len);
    r = r ? r : rlk_loop_eval(op->w.base.lc, RLK_SCRIPT_LOCK_RELEASE, cmd, len, fn, op);
    free(cmd);
    return r;
}

/* The release, synced: short of acknowledgements it still succeeds, with a WARN. */
static int lop_unlock_send(lop_unlock *u, rlk_acq *a, int64_t lease_ms)
{
    char *cmd = NULL;
    size_t len = 0;
    int r = lop_release_format(u->lock, a, lease_ms, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(u->lc, RLK_SCRIPT_LOCK_RELEASE, cmd, len, lop_unlock_reply, u);
    free(cmd);
    return r;
}

RLOCK_EXPORT int rlock_unlock_async(rlock *lock, rlock_owner *owner, rlock_done_fn done,
                                    void *user_data)
{
    if (lock == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_unlock_async: lock and done must not be NULL");
    }
    if (lock->ops->group) {
        return rlk_loop_group_unlock(lock, owner, done, user_data);
    }
    uint64_t tid = 0;
    int r = rlk_owner_tid(owner, lock->client, "rlock_unlock_async", &tid);
    return r ? r : rlk_loop_unlock_start(lock, tid, done, user_data);
}

int rlk_loop_unlock_start(rlock *lock, uint64_t tid, rlock_done_fn done, void *user_data)
{
    rlk_loop_client *lc = NULL;
    int r = rlk_client_check(lock->client);
    if (r == RLOCK_OK && (lc = rlk_loop_of(lock->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "rlock_unlock_async needs a loop client (rlock_async.h)");
    }
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
    rlk_loop_hold *h =
        rlk_loop_hold_get(lc, lock->name, lock->name_len, tid, rlk_loop_hold_side(lock), 0);
    int64_t lease = h != NULL ? h->lease_ms : lock->client->opts.watchdog_timeout_ms;
    if (lock->kind == RLOCK_FAIR) {
        r = rlk_loop_fair_release(lc, &a, lease, lop_unlock_reply, u);
    } else if (lock->kind == RLOCK_READ || lock->kind == RLOCK_WRITE) {
        r = rlk_loop_rw_release(lc, &a, 1, lop_unlock_reply, u);
    } else {
        r = lop_unlock_send(u, &a, lease); /* reentrant and spin: one data layout */
    }
    if (r != RLOCK_OK) {
        free(u);
    }
    return r;
}
