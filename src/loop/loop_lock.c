/*
 * The start of a single-name lock's acquire on a loop client by its kind (loop_reentrant.c,
 * loop_fair.c, loop_rw.c, loop_spin.c) and the release of every kind (loop_lock.h). Static
 * helpers are named lop_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "loop_fair.h"
#include "loop_lock.h"
#include "loop_lock_wait.h"
#include "loop_reentrant.h"
#include "loop_rw.h"
#include "loop_spin.h"
#include "loop_sync.h"
#include "loop_watchdog.h"
#include "owner.h"
#include "release_reply.h"
#include "replica.h"

int rlk_loop_lock_start(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                        rlock_done_fn done, void *user_data)
{
    switch (lock->kind) {
    case RLOCK_FAIR:
        return rlk_loop_fair_lock(lc, lock, tid, args, done, user_data);
    case RLOCK_READ:
    case RLOCK_WRITE:
        return rlk_loop_rw_lock(lc, lock, tid, args, done, user_data);
    case RLOCK_SPIN:
        return rlk_loop_spin_lock(lc, lock, tid, args, done, user_data);
    default:
        return rlk_loop_reentrant_lock(lc, lock, tid, args, done, user_data);
    }
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

static int lop_unlock_send(lop_unlock *u, rlk_acq *a, int64_t lease_ms)
{
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_loop_reentrant_release_format(u->lock, a, lease_ms, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(u->lc, RLK_SCRIPT_LOCK_RELEASE, cmd, len, lop_unlock_reply, u);
    free(cmd);
    return r;
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
