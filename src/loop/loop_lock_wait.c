/*
 * The part of a loop lock's waiting operation that the reentrant and fair locks share
 * (loop_lock_wait.h): the owner's acquisition record, the channel, the messages, and the
 * completion that records a grant. Static helpers are named llw_*.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "loop_cluster.h"
#include "loop_lock_wait.h"
#include "loop_route.h"
#include "loop_watchdog.h"
#include "replica.h"
#include "scripts.h"

/* A lock's name in messages: "lock" or "fair lock". */
static const char *llw_what(const rlk_loop_lock_op *op)
{
    return op->a.lock->kind == RLOCK_FAIR ? "fair lock" : "lock";
}

void rlk_loop_lock_complete(rlk_loop_wait *w, int rc)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    rlk_loop_hold *h = NULL;
    if (rc == RLOCK_OK) {
        rc = rlk_loop_hold_grant(w->base.lc, op->a.lock, &op->a);
    }
    if (rc == RLOCK_OK) {
        h = rlk_loop_hold_get(w->base.lc, op->a.lock->name, op->a.lock->name_len, op->a.tid,
                              rlk_loop_hold_side(op->a.lock), 0);
    }
    if (h != NULL && op->on_lost != NULL) { /* a re-entry without one keeps the hold's */
        h->on_lost = op->on_lost;
        h->lost_ud = op->lost_ud;
        h->lost_lock = op->a.lock;
    }
    (void)rlk_obs_acquire_end(op->a.client, &op->obs, op->a.lock->name, op->a.owner, rc,
                              h != NULL ? h->token : 0, h != NULL ? h->count : 0);
    rlock *lock = op->a.lock;
    rlock_done_fn done = (rlock_done_fn)w->done;
    void *user_data = w->user_data;
    free(op);
    done(lock, rc, user_data);
}

void rlk_loop_lock_say(rlk_loop_wait *w, int rc)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    if (rc == RLOCK_ECANCELED) {
        (void)rlk_err(rc, "%s '%s': the wait was cancelled", llw_what(op), op->a.lock->name);
    } else if (rc == RLOCK_ECLOSED) {
        (void)rlk_err(rc, "%s '%s': the client was freed", llw_what(op), op->a.lock->name);
    }
}

int rlk_loop_lock_join(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    rlk_buf ch;
    rlk_buf_init(&ch);
    int r = op->a.lock->single->channel(&op->a, &ch);
    r = r ? r : rlk_loop_join(&w->base, ch.p, ch.len);
    rlk_buf_free(&ch);
    return r;
}

static void llw_abandoned_done(void *arg, redisReply *rep, int err)
{
    (void)rep;
    (void)err;
    rlk_loop_lock_op *op = arg;
    free(op->lost_ud);
    free(op);
}

void rlk_loop_lock_abandoned_reply(rlk_loop_lock_op *op, redisReply *rep, int err)
{
    const rlk_loop_back *b = op->lost_ud;
    int granted = err == RLOCK_OK && rep != NULL && rep->type == REDIS_REPLY_ARRAY &&
                  rep->elements >= 1 && rep->element[0]->type == REDIS_REPLY_INTEGER &&
                  rep->element[0]->integer == 1;
    if (granted && rlk_loop_eval(op->w.base.lc, RLK_SCRIPT_LOCK_RELEASE, b->cmd, b->len,
                                 llw_abandoned_done, op) == RLOCK_OK) {
        return;
    }
    llw_abandoned_done(op, NULL, err);
}

/* The give-back of a grant fewer replicas acknowledged came back: the operation waits on while
 * its wait lasts (the next attempt after a short pause), else ends with RLOCK_EREPLICA. A
 * give-back that failed ends it with that error: the grant may stand, and a next attempt of the
 * same owner would re-enter it (a hold no unlock ends); it runs out with its lease instead. */
static void llw_given_back(void *arg, redisReply *rep, int err)
{
    rlk_loop_lock_op *op = arg;
    if (op->w.done == NULL) {
        llw_abandoned_done(op, rep, err); /* the give-back was the release: nothing is held */
        return;
    }
    if (err == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        err = rlk_err(RLOCK_EREDIS,
                      "%s '%s': giving back a grant the replicas did not "
                      "acknowledge: %s",
                      llw_what(op), op->a.lock->name, rep->str);
    }
    if (err != RLOCK_OK) {
        rlk_loop_wait_result(&op->w, err, -1);
        return;
    }
    int64_t left = op->w.deadline == INT64_MAX ? INT64_MAX : op->w.deadline - rlk_now_ms();
    if (left > 0 && op->a.wait_ms != 0) {
        rlk_loop_wait_result(&op->w, 0, left < 100 ? left : 100);
        return;
    }
    rlk_loop_wait_result(
        &op->w, rlk_sync_error(op->undo_acked, op->undo_n, llw_what(op), op->a.lock->name), -1);
}

/* lock_wait.c's undo_unsynced() on the loop: 1 when a short grant's give-back was sent. */
static int llw_undo(rlk_loop_lock_op *op)
{
    if (op->w.ops->give_back == NULL || !rlk_sync_short(&op->undo_acked, &op->undo_n)) {
        return 0;
    }
    rlk_obs_replica_sync_failed(op->a.client, rlk_obs_kind_of((rlock_kind)op->a.lock->kind),
                                op->a.lock->name, op->a.owner, RLOCK_EREPLICA);
    rlk_sync_suppress(1);
    int r = op->w.ops->give_back(&op->w, llw_given_back);
    rlk_sync_suppress(0);
    return r == RLOCK_OK;
}

void rlk_loop_lock_result(rlk_loop_lock_op *op, redisReply *rep, int err,
                          int (*decode)(rlk_loop_lock_op *op, redisReply *rep))
{
    if (op->w.done == NULL) {
        rlk_loop_lock_abandoned_reply(op, rep, err);
        return;
    }
    int r = err;
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "%s '%s': %s", llw_what(op), op->a.lock->name, rep->str);
    }
    r = r ? r : decode(op, rep);
    if (r == 1 && llw_undo(op)) {
        return;
    }
    /* A busy lock is attempted again after the holder's TTL at the latest: a lease that ran
     * out sends no message. */
    rlk_loop_wait_result(&op->w, r, op->a.ttl_ms > 0 ? op->a.ttl_ms : -1);
}

void rlk_loop_lock_prepare(rlk_loop_lock_op *op, rlock *lock, uint64_t tid,
                           const rlock_lock_args *args, rlock_done_fn done, void *user_data)
{
    op->w.done = (void (*)(void))done;
    op->w.user_data = user_data;
    op->w.deadline = rlk_loop_deadline(args->wait_ms);
    rlk_call_ctx saved;
    rlk_call_enter(tid, NULL, &saved);
    rlk_acq_init(&op->a, lock);
    rlk_call_leave(&saved);
    op->a.watchdog = args->lease_ms < 0;
    op->a.lease_ms = op->a.watchdog ? lock->client->opts.watchdog_timeout_ms : args->lease_ms;
    op->a.wait_ms = args->wait_ms;
    op->on_lost = args->on_lost;
    op->lost_ud = args->user_data;
}

int rlk_loop_lock_begin(rlk_loop_client *lc, rlk_loop_lock_op *op, const rlock_cancel *cancel)
{
    int r = rlk_loop_wait_start(lc, &op->w, cancel);
    if (r == RLOCK_OK) {
        rlk_obs_acquire_begin(op->a.lock->client, &op->obs, rlk_obs_kind_of(op->a.lock->kind),
                              op->a.lock->name, op->a.owner);
    }
    return r;
}

int rlk_loop_send_last(rlk_loop_client *lc, int script, const char *cmd, size_t len)
{
    const rlk_script_src *s = rlk_script_get(script);
    const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->body};
    size_t lens[3] = {6, 4, s->len};
    if (lc->cluster != NULL) { /* to the key's master, as the request went */
        int slot = rlk_loop_request_slot(cmd, len);
        int r = rlk_loop_cluster_command(lc->cluster, slot, 3, argv, lens, NULL, NULL);
        return r ? r : rlk_loop_cluster_send(lc->cluster, slot, cmd, len, NULL, NULL);
    }
    int r = rlk_lconn_command(lc->data, 3, argv, lens, NULL, NULL);
    return r ? r : rlk_lconn_send(lc->data, cmd, len, NULL, NULL);
}
