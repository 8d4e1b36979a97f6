/*
 * The acquire of every single-key lock type (rlk_single_acquire): the settling of an earlier
 * unsure outcome, the first attempt, the wait (lock_wait.c) and the hold record a grant makes,
 * with its fencing token and renewal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "error.h"
#include "lock.h"
#include "lock_hold.h"
#include "lock_observe.h"
#include "lock_release.h"
#include "lock_wait.h"
#include "replica.h"

/* The renewal a hold granted by a release needs (a->granted_ttl > 0): the grant gave the grant
 * TTL only, so a longer lease is renewed within a third of it, by the watchdog for good (watchdog
 * holds) or once (explicit leases). Neither delays the caller (watchdog.h, rlk_wd_add_soon). */
static int grant_extend(rlk_acq *a, rlk_hold *h, int watchdog)
{
    rlock_client *c = a->lock->client;
    if (watchdog) {
        return rlk_wd_add_soon(c->watchdog, &h->wd, c->opts.watchdog_timeout_ms, a->granted_ttl);
    }
    if (a->lease_ms > a->granted_ttl && !rlk_wd_active(c->watchdog, &h->wd)) {
        return rlk_wd_add_once(c->watchdog, &h->wd, a->lease_ms, a->granted_ttl);
    }
    return RLOCK_OK;
}

/* The fencing counter's value (GET redisson_lock_token:{name}) into a->token, or a negative
 * error. */
static int token_read(rlk_acq *a)
{
    rlock *l = a->lock;
    rlk_buf key;
    rlk_buf_init(&key);
    redisReply *rep = NULL;
    rlk_args args;
    rlk_args_init(&args);
    int r = rlk_prefix_name(&key, "redisson_lock_token", l->name, l->name_len);
    rlk_args_adds(&args, "GET");
    rlk_args_add(&args, key.p, key.len);
    r = r ? r : rlk_cmd(l->client, RLK_IDEMPOTENT, &args, &rep);
    rlk_buf_free(&key);
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_STRING) {
        a->token = strtoull(rep->str, NULL, 10);
    } else if (r == RLOCK_OK) {
        r = rlk_err(RLOCK_EPROTO, "GET of the fencing counter of '%s': reply type %d", l->name,
                    rep->type);
    }
    freeReplyObject(rep);
    return r;
}

/* An exclusive grant that Redis made as a re-entry (token 0) of a hold this record does not
 * count: the thread holds the lock through another handle, or a failover brought back a hold the
 * thread had released. Its token is the counter's value, since nothing takes an exclusive lock
 * from free while it is held; so that a successful lock never reports token 0, it is read here.
 * Read grants carry the counter's value already (0 when no writer ever held). */
static int grant_token(rlk_acq *a, const rlk_hold *h)
{
    if (h->count > 0 || a->token != 0 || a->lock->kind == RLOCK_READ) {
        return RLOCK_OK;
    }
    int r = token_read(a);
    if (r != RLOCK_OK) {
        /* Held on Redis with no token to report: give the re-entry back. */
        char saved[256];
        snprintf(saved, sizeof(saved), "%s", rlock_last_error());
        (void)a->lock->single->release(a);
        rlk_err_restore(saved);
    }
    return r;
}

/* Records a grant in the calling thread's hold record and starts renewal if asked. */
static int hold_grant(rlk_acq *a, int watchdog)
{
    rlock *l = a->lock;
    rlk_hold *h = rlk_hold_get(l, a->tid, 1);
    if (h == NULL) {
        /* We hold it on Redis but cannot track it: give it back rather than leak a hold. */
        a->lease_ms = l->client->opts.watchdog_timeout_ms;
        l->single->release(a);
        return rlk_err(RLOCK_ENOMEM, "cannot record a hold");
    }
    if (atomic_load(&h->lost)) {
        /* A new grant after a lost one starts over: the old hold is gone on Redis. */
        rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
        rlk_hold_stop_renewal(l, h);
        h->count = 0;
        atomic_store(&h->lost, 0);
    }
    int r = grant_token(a, h);
    if (r != RLOCK_OK) {
        rlk_hold_drop_if_empty(l, h);
        return r;
    }
    if (h->count == 0 || a->token != 0) {
        h->token = a->token;
    }
    /* A re-entry never shortens the hold: the lease a partial release keeps is the longest one
     * granted, and a hold under the watchdog stays under it until its last release. */
    if (h->count == 0 || a->lease_ms > h->lease_ms) {
        h->lease_ms = a->lease_ms;
    }
    h->count++;
    if (a->granted_ttl > 0) {
        return grant_extend(a, h, watchdog);
    }
    if (watchdog && h->count > 1 && h->wd.once) {
        /* A re-entry under the watchdog of a hold whose one-shot renewal may still be due. */
        rlk_wd_cancel(l->client->watchdog, &h->wd);
        h->wd.once = 0;
    }
    if (watchdog && (h->count == 1 || !rlk_wd_active(l->client->watchdog, &h->wd))) {
        return rlk_wd_add(l->client->watchdog, &h->wd, l->client->opts.watchdog_timeout_ms);
    }
    return RLOCK_OK;
}

/* A thread that locks again after an unlock with an unknown outcome has moved on from that hold:
 * the pending release is settled (and sent if it never ran) before the new attempt, so that the
 * new grant is counted on what Redis holds and not on a hold that may be gone (a "ghost": a
 * re-entry of nothing, or a hold kept alive by the watchdog after the thread let it go). */
static int settle_before_lock(rlock *l, uint64_t tid)
{
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h != NULL && atomic_load(&h->lost)) {
        rlk_hold_stop_renewal(l, h);
        rlk_hold_lost_unsure(l, h);
    }
    if (h == NULL || h->unsure == 0) {
        return RLOCK_OK;
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.lease_ms = h->lease_ms > 0 ? h->lease_ms : l->client->opts.watchdog_timeout_ms;
    int r = (h->unsure & RLK_UNSURE_GRANT) ? rlk_settle_grant(&a, h) : RLOCK_OK;
    if (r != RLOCK_OK) {
        return r;
    }
    if (h->unsure & RLK_UNSURE_GRANT) {
        /* The count was read where the replicas did not acknowledge it: a hold the thread does
         * not count may stand on the real master, and the attempt could re-enter it. */
        return RLOCK_EREPLICA;
    }
    if (h->unsure & RLK_UNSURE_RELEASE) {
        r = rlk_single_unlock(l);
        return r == RLOCK_ELOST ? RLOCK_OK : r;
    }
    rlk_hold_drop_if_empty(l, h);
    return RLOCK_OK;
}

/* Marks that the thread's last attempt may have been granted unseen (its reply was lost, or the
 * give-back of an unsynced grant may have failed), or that a release may still grant it to the
 * wait whose give-up failed, for rlk_settle_grant() to settle next time. */
static void mark_grant_unsure(rlk_acq *a)
{
    rlk_hold *h = rlk_hold_get(a->lock, a->tid, 1);
    if (h != NULL) {
        h->unsure |= RLK_UNSURE_GRANT | (a->leave_failed ? RLK_UNSURE_LEAVE : 0);
    }
}

static int single_acquire_by(rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t deadline);

/* A call with a wait limit returns within wait_ms + command_timeout_ms: every command it sends
 * (settling, attempts, the give-up of a waiter) is bounded by that (rlk_pool_bound). A command
 * the bound cuts short fails as on a timeout (RLOCK_ECONN), and what it would have done is left
 * to expire: a waiter's queue entry ends waiter_timeout_ms after its last heartbeat (rlock.h). */
int rlk_single_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    int64_t saved =
        rlk_pool_bound(wait_ms < 0 ? 0 : rlk_add_sat(deadline, l->client->opts.command_timeout_ms));
    int r = single_acquire_by(l, wait_ms, lease_ms, deadline);
    rlk_pool_bound_restore(saved);
    return r;
}

static int single_acquire_by(rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t deadline)
{
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.lease_ms = lease_ms > 0 ? lease_ms : l->client->opts.watchdog_timeout_ms;
    a.watchdog = lease_ms < 0;
    a.wait_id = rlk_wait_id_next();
    a.wait_ms = wait_ms;
    a.may_queue = wait_ms != 0;
    /* A fired token ends the call before it sends anything. */
    int r = rlk_cancel_check(a.cancel, "lock", l->name);
    r = r ? r : settle_before_lock(l, a.tid);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_sync_clear();
    a.confirms = rlk_pubsub_confirms(l->client->pubsub);
    r = rlk_keep_synced(&a, l->single->attempt(&a));
    if (r == 0 && wait_ms != 0) {
        r = l->single->wait != NULL ? l->single->wait(&a, deadline) : rlk_wait_loop(&a, deadline);
    }
    if (r == 1) {
        return hold_grant(&a, lease_ms < 0);
    }
    if (r == RLOCK_ECONN || r == RLOCK_EREPLICA || (r != 1 && (a.leave_failed || a.back_failed))) {
        mark_grant_unsure(&a);
    }
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT, "lock '%s' not acquired within %lld ms", l->name,
                       (long long)wait_ms);
    }
    return r;
}
