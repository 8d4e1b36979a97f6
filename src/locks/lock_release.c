/*
 * The release of single-key locks (rlock_unlock), and the settling of outcomes that a lost reply
 * left unknown: a grant (RLK_UNSURE_GRANT), a release (RLK_UNSURE_RELEASE), a give-up
 * (RLK_UNSURE_LEAVE), each checked against the hold count on Redis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "lock_hold.h"
#include "lock_observe.h"
#include "lock_query.h"
#include "lock_release.h"
#include "replica.h"

/* Leaves the queues of a wait whose give-up did not reach Redis (RLK_UNSURE_LEAVE): it removes
 * the wait's grant registration, so no release can grant the lock to that wait after the count
 * that rlk_settle_grant() then reads. Bounded by command_timeout_ms when the call has no bound of
 * its own (an unlock, a lock without a wait limit). */
static int settle_leave(rlk_acq *a, rlk_hold *h)
{
    int r = RLOCK_OK;
    if ((h->unsure & RLK_UNSURE_LEAVE) && a->lock->single->wait_end != NULL) {
        int64_t bound = rlk_pool_bound_get();
        int64_t saved =
            bound != 0
                ? 0
                : rlk_pool_bound(rlk_add_sat(rlk_now_ms(), a->client->opts.command_timeout_ms));
        a->may_queue = 1;
        r = a->lock->single->wait_end(a, 0);
        a->may_queue = 0;
        a->token = 0;
        a->granted_ttl = 0;
        if (bound == 0) {
            rlk_pool_bound_restore(saved);
        }
    }
    if (r < 0) {
        return r;
    }
    h->unsure &= (unsigned char)~RLK_UNSURE_LEAVE;
    return RLOCK_OK;
}

/* Settles an attempt whose outcome was unknown (RLK_UNSURE_GRANT): when Redis counts more holds
 * of the thread's field than the record does, that attempt was granted and its reply lost, or a
 * release that fewer replicas acknowledged was undone by a failover. The thread does not count
 * that hold, so it is given back (without waiting for replicas); a later
 * attempt then takes the lock from free, with a token of its own, instead of re-entering it and
 * keeping a hold nobody will release. Returns RLOCK_OK or a negative error; the mark stays when
 * the count was read on a node whose replicas did not acknowledge (rlk_field_count_settle), which
 * may count too few. */
int rlk_settle_grant(rlk_acq *a, rlk_hold *h)
{
    int left = settle_leave(a, h);
    if (left != RLOCK_OK) {
        return left;
    }
    int trusted = 1;
    int n = rlk_field_count_settle(a, &trusted);
    if (n < 0) {
        return n;
    }
    if (n > h->count) {
        /* One release per hold the record does not count (several when a lost hold with
         * re-entries stood). */
        int r = 0;
        rlk_sync_suppress(1);
        for (int k = n - h->count; k > 0 && r == 0; k--) {
            r = a->lock->single->release(a);
        }
        rlk_sync_suppress(0);
        if (r < 0 && r != RLK_NOT_HELD) {
            return r;
        }
        rlk_log(a->client, RLOCK_LOG_INFO,
                "lock '%s': gave back a hold the thread did not count (a grant whose reply was "
                "lost, a release that a failover undid, or a hold judged lost that still stood)",
                a->lock->name);
    }
    if (trusted) {
        h->unsure &= (unsigned char)~RLK_UNSURE_GRANT;
    }
    return RLOCK_OK;
}

/* Settles a release whose outcome was unknown (RLK_UNSURE_RELEASE) against Redis: the field's count
 * there is h->count if that release never ran and h->count - 1 if it did (less still if the holds
 * are gone: lease ran out, failover). The record keeps the smaller count, so it never counts a hold
 * Redis does not have. Returns how many holds the record dropped (0: the release never ran), or
 * a negative error (the record stays unsure): RLOCK_EREPLICA when a count below the record's
 * was read on a node whose replicas did not acknowledge, which may count too few. Limitation:
 * holds of the same lock taken by the same thread through another handle share the field, so
 * with such holds a release that ran looks as if it had not. */
static int hold_settle(rlk_acq *a, rlk_hold *h)
{
    int trusted = 1;
    int n = rlk_field_count_settle(a, &trusted);
    if (n < 0) {
        return n;
    }
    if (n < h->count && !trusted) {
        return RLOCK_EREPLICA;
    }
    int gone = n < h->count ? h->count - n : 0;
    h->count -= gone;
    h->unsure &= (unsigned char)~RLK_UNSURE_RELEASE;
    return gone;
}

/* An unlock of a record whose last release has an unknown outcome. If that release ran, this
 * call was its retry and nothing is sent again: RLOCK_OK, or RLOCK_ELOST when holds beyond the
 * released one are gone too. If it never ran, returns 1: the caller sends it now. */
static int unlock_unsure(rlk_acq *a, rlk_hold *h)
{
    int before = h->count;
    int gone = hold_settle(a, h);
    if (gone <= 0) {
        return gone == 0 ? 1 : gone;
    }
    if (h->count > 0) {
        return RLOCK_OK;
    }
    rlk_hold_obs_end(a->lock, h, before > 1 ? RLK_HOLD_LOST : RLK_HOLD_RELEASED);
    rlk_hold_forget(a->lock, h);
    if (before > 1) {
        return rlk_err(RLOCK_ELOST,
                       "the holds on lock '%s' were gone on Redis when an unlock "
                       "whose outcome was unknown was retried",
                       a->lock->name);
    }
    return RLOCK_OK;
}

/* 1 when the release just sent ran on the master but fewer replicas acknowledged it than it
 * has: a failover to one of them would bring the released hold back. The unlock still succeeds
 * (the master released), and the record is marked as after a grant whose reply was lost
 * (RLK_UNSURE_GRANT: Redis may count one hold more than the record), so that the thread's next
 * lock or unlock gives such a hold back before it counts on what Redis holds, instead of
 * re-entering it (a hold count the thread does not know, and no token of its own). */
static int unlock_unsynced(rlk_acq *a, rlk_hold *h)
{
    int acked = 0, n = 0;
    if (!rlk_sync_short(&acked, &n)) {
        return 0;
    }
    rlk_obs_replica_sync_failed(a->client, rlk_obs_kind_of((rlock_kind)a->lock->kind),
                                a->lock->name, a->owner, RLOCK_EREPLICA);
    rlk_log(a->client, RLOCK_LOG_WARN,
            "unlock of '%s': %d of %d replicas acknowledged; the next lock or unlock of this "
            "thread checks that the release stayed",
            a->lock->name, acked, n);
    h->unsure |= RLK_UNSURE_GRANT;
    return 1;
}

/* 1 when the release just sent found no hold but fewer replicas acknowledged than the node is
 * counted to have: the node may have lost its data without knowing yet that it was replaced (a
 * restarted master before the cluster demotes it), and the hold may stand on the master that
 * replaced it. The outcome is then unknown, as after a connection error: the record stays, marked,
 * for a retry of the unlock or the thread's next lock to settle (RLOCK_EREPLICA is set). */
static int unlock_unsure_gone(rlk_acq *a, rlk_hold *h)
{
    int acked = 0, n = 0;
    if (!rlk_sync_short(&acked, &n)) {
        return 0;
    }
    h->unsure = RLK_UNSURE_RELEASE;
    (void)rlk_sync_error(acked, n, "unlock of", a->lock->name);
    return 1;
}

/* Sends the release of one hold of h and records its outcome. */
static int unlock_send(rlk_acq *a, rlk_hold *h)
{
    rlock *l = a->lock;
    rlk_sync_clear();
    int r = l->single->release(a);
    int unsynced = (r == 0 || r == 1) && unlock_unsynced(a, h);
    if (r == 0 && --h->count > 0) {
        return RLOCK_OK;
    }
    /* Here the thread's last hold through this handle is gone (or Redis still counts holds
     * taken through another handle, which that handle's record tracks). An unsynced release
     * keeps the record, with no hold and no renewal, until the thread's next lock settles it. */
    if (r == 0 || r == 1) {
        h->count = 0;
        rlk_hold_obs_end(l, h, RLK_HOLD_RELEASED);
        if (!unsynced) {
            rlk_hold_forget(l, h);
        }
        return RLOCK_OK;
    }
    if (r == RLK_NOT_HELD && unlock_unsure_gone(a, h)) {
        return RLOCK_EREPLICA;
    }
    if (r == RLK_NOT_HELD) {
        rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
        rlk_hold_forget(l, h);
        return rlk_err(RLOCK_ELOST, "the hold on lock '%s' had expired on Redis before unlock",
                       l->name);
    }
    /* Unknown outcome: the record stays, marked, so that a retry of the unlock, or the thread's
     * next lock, settles it against Redis instead of counting a hold that may be gone. Renewal
     * stopped above for a last hold; with more holds, at least count - 1 remain either way and
     * stay renewed. */
    h->unsure = RLK_UNSURE_RELEASE;
    return r;
}

int rlk_single_unlock(rlock *l)
{
    uint64_t tid = rlk_thread_id();
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h == NULL || h->count == 0) {
        return rlk_err(RLOCK_ENOTOWNER,
                       "lock '%s' is not held by this thread (id %llu) through "
                       "this handle",
                       l->name, (unsigned long long)tid);
    }
    if (h->count == 1) {
        /* The last local hold: stop renewing before the release reaches Redis. A renewal that
         * ran after the release would find the owner gone and report a spurious loss; the
         * cancel waits for an in-flight batch, so none can (and the lost check below sees what
         * that batch judged). A settled unsure record below only ever loses holds without a
         * release being sent, so no other cancel is needed. */
        rlk_hold_stop_renewal(l, h);
    }
    if (atomic_load(&h->lost)) {
        rlk_hold_stop_renewal(l, h);
        rlk_hold_lost_unsure(l, h);
        return rlk_err(RLOCK_ELOST,
                       "the hold on lock '%s' was lost before unlock (its lease "
                       "ran out)",
                       l->name);
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.hold = h;
    a.lease_ms = h->lease_ms;
    int r = (h->unsure & RLK_UNSURE_GRANT) ? rlk_settle_grant(&a, h) : RLOCK_OK;
    if (r != RLOCK_OK) {
        /* The release was not sent, yet the caller may move on as after any failed unlock: it
         * is left pending, so that the thread's next lock or unlock sends it (unlock_unsure()
         * finds that it never ran) instead of re-entering a hold the thread let go. */
        h->unsure |= RLK_UNSURE_RELEASE;
        return r;
    }
    r = (h->unsure & RLK_UNSURE_RELEASE) ? unlock_unsure(&a, h) : 1;
    return r == 1 ? unlock_send(&a, h) : r;
}
