/*
 * Latch operations on a loop client (loop_latch.h). An await's attempt reads the count (GET, as
 * rlock_latch_count()); a count-down runs latch_count_down.lua with a request key of its own.
 * Static helpers are named lat_*.
 */
#include <stdlib.h>

#include "loop_sync.h"
#include "replica.h"
#include "error.h"
#include "latch.h"
#include "cluster_slot.h"
#include "loop_latch.h"
#include "scripts.h"

typedef struct lat {
    rlk_loop_wait w;
    rlock_latch *l;
    rlk_obs_wait obs;
} lat;

static int lat_check(rlock_latch *l, rlock_latch_done_fn done, const char *what,
                     rlk_loop_client **lc)
{
    if (l == NULL || done == NULL) {
        (void)rlk_err(RLOCK_EINVAL, "%s: latch and done must not be NULL", what);
        return RLOCK_EINVAL;
    }
    int r = rlk_client_check(l->client);
    if (r == RLOCK_OK && (*lc = rlk_loop_of(l->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "%s needs a loop client (rlock_async.h)", what);
    }
    return r;
}

static void lat_say(rlk_loop_wait *w, int rc)
{
    const rlock_latch *l = RLK_CONTAINER_OF(w, lat, w)->l;
    if (rc == RLOCK_ETIMEDOUT) {
        (void)rlk_err(rc, "latch '%s' still counting at the end of the wait", l->name);
    } else if (rc == RLOCK_ECANCELED) {
        (void)rlk_err(rc, "latch '%s': the wait was cancelled", l->name);
    } else if (rc == RLOCK_ECLOSED) {
        (void)rlk_err(rc, "latch '%s': the client was freed", l->name);
    }
}

static void lat_complete(rlk_loop_wait *w, int rc)
{
    lat *op = RLK_CONTAINER_OF(w, lat, w);
    rlock_latch *l = op->l;
    /* An await counts as an acquire that holds nothing, as the blocking await's. */
    rc = rlk_obs_acquire_end(l->client, &op->obs, l->name, NULL, rc, 0, 0);
    rlock_latch_done_fn done = (rlock_latch_done_fn)w->done;
    void *user_data = w->user_data;
    free(op);
    done(l, rc, user_data);
}

static void lat_reply(void *arg, redisReply *rep, int err)
{
    lat *op = arg;
    int64_t v = err;
    if (v == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        v = rlk_err(RLOCK_EREDIS, "latch '%s': %s", op->l->name, rep->str);
    }
    v = v ? v : rlk_latch_count_reply(op->l, rep);
    rlk_loop_wait_result(&op->w, v < 0 ? (int)v : v == 0, -1);
}

static int lat_attempt(rlk_loop_wait *w)
{
    lat *op = RLK_CONTAINER_OF(w, lat, w);
    rlk_args argv;
    rlk_latch_count_args(op->l, &argv);
    int slot = rlk_cluster_key_slot(argv.v[1], argv.len[1]);
    return rlk_loop_command(w->base.lc, slot, argv.n, argv.v, argv.len, lat_reply, op);
}

static int lat_join(rlk_loop_wait *w)
{
    const rlock_latch *l = RLK_CONTAINER_OF(w, lat, w)->l;
    return rlk_loop_join(&w->base, l->channel.p, l->channel.len);
}

static const rlk_loop_wait_ops lat_ops = {
    .attempt = lat_attempt,
    .join = lat_join,
    .say = lat_say,
    .complete = lat_complete,
};

RLOCK_EXPORT int rlock_latch_await_async(rlock_latch *latch, int64_t wait_ms, rlock_cancel *cancel,
                                         rlock_latch_done_fn done, void *user_data)
{
    rlk_loop_client *lc = NULL;
    int r = lat_check(latch, done, "rlock_latch_await_async", &lc);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    r = r ? r : rlk_cancel_check(cancel, "latch", latch->name);
    lat *op = r == RLOCK_OK ? calloc(1, sizeof(*op)) : NULL;
    if (r != RLOCK_OK || op == NULL) {
        return r ? r : rlk_err(RLOCK_ENOMEM, "rlock_latch_await_async: out of memory");
    }
    op->l = latch;
    op->w.ops = &lat_ops;
    op->w.done = (void (*)(void))done;
    op->w.user_data = user_data;
    op->w.deadline = rlk_loop_deadline(wait_ms);
    r = rlk_loop_wait_start(lc, &op->w, cancel);
    if (r != RLOCK_OK) {
        free(op);
        return r;
    }
    rlk_obs_acquire_begin(latch->client, &op->obs, RLOCK_MK_LATCH, latch->name, NULL);
    return RLOCK_OK;
}

/* ---- count down ------------------------------------------------------------------------ */

typedef struct lcd {
    rlock_latch *l;
    rlk_sem_req q;
    rlock_latch_done_fn done;
    void *user_data;
} lcd;

static void lcd_reply(void *arg, redisReply *rep, int err)
{
    lcd *u = arg;
    rlock_latch *l = u->l;
    int r = err;
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(rep->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_EPROTO,
                    "latch '%s': unexpected count-down reply", l->name);
    }
    int acked = 0, n = 0;
    if (r == RLOCK_OK && rlk_sync_short(&acked, &n)) {
        /* Not undone, as latch.c says why: the caller learns a failover may forget it. */
        rlk_obs_replica_sync_failed(l->client, RLOCK_MK_LATCH, l->name, NULL, RLOCK_EREPLICA);
        r = rlk_sync_error(acked, n, "latch count-down", l->name);
    }
    rlock_latch_done_fn done = u->done;
    void *user_data = u->user_data;
    rlk_sem_req_free(&u->q);
    free(u);
    done(l, r, user_data);
}

RLOCK_EXPORT int rlock_latch_count_down_async(rlock_latch *latch, rlock_latch_done_fn done,
                                              void *user_data)
{
    rlk_loop_client *lc = NULL;
    int r = lat_check(latch, done, "rlock_latch_count_down_async", &lc);
    lcd *u = r == RLOCK_OK ? calloc(1, sizeof(*u)) : NULL;
    if (r != RLOCK_OK || u == NULL) {
        return r ? r : rlk_err(RLOCK_ENOMEM, "rlock_latch_count_down_async: out of memory");
    }
    *u = (lcd){.l = latch, .done = done, .user_data = user_data};
    r = rlk_sem_req_init(&u->q, latch->name, latch->name_len, 1);
    if (r != RLOCK_OK) {
        free(u);
        return r;
    }
    rlk_args keys, args;
    rlk_latch_keyed_args(latch, &u->q, &keys, &args);
    char *cmd = NULL;
    size_t len = 0;
    r = rlk_script_format(RLK_SCRIPT_LATCH_COUNT_DOWN, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(lc, RLK_SCRIPT_LATCH_COUNT_DOWN, cmd, len, lcd_reply, u);
    free(cmd);
    if (r != RLOCK_OK) {
        rlk_sem_req_free(&u->q);
        free(u);
    }
    return r;
}
