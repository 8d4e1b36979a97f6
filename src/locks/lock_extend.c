/*
 * rlock_extend of single-key locks: lua/lock_extend.lua on the owner's field, the record's lease
 * after it, and a hold found gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "lock_extend.h"
#include "lock_hold.h"
#include "lock_observe.h"
#include "lock_query.h"
#include "replica.h"
#include "scripts.h"

int rlk_hash_extend_read(rlk_acq *a, int64_t lease_ms, const rlk_buf *timeout_prefix)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, a->lock->name, a->lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_add(&args, timeout_prefix != NULL ? timeout_prefix->p : "",
                 timeout_prefix != NULL ? timeout_prefix->len : 0);
    redisReply *rep = NULL;
    long long v = 0;
    /* Not idempotent: with replica_sync the write waits for the replicas, as every write. */
    int r = rlk_script(a->client, RLK_SCRIPT_LOCK_EXTEND, RLK_SYNCED, &keys, &args, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "lock_extend");
    freeReplyObject(rep);
    return r ? r : (v == 1 ? 1 : RLK_NOT_HELD);
}

int rlk_hash_extend(rlk_acq *a, int64_t lease_ms)
{
    return rlk_hash_extend_read(a, lease_ms, NULL);
}

/* The extend of a hold that Redis no longer has: the record goes, renewal stops, and the loss
 * counts as reported (no per-hold callback follows). */
static int rlk_extend_lost(rlock *l, rlk_hold *h)
{
    rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
    rlk_hold_forget(l, h);
    return rlk_err(RLOCK_ELOST, "the hold on lock '%s' was gone when it was extended", l->name);
}

int rlk_single_extend(rlock *l, int64_t lease_ms)
{
    uint64_t tid = rlk_thread_id();
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h == NULL || h->count == 0) {
        return rlk_err(RLOCK_ENOTOWNER,
                       "lock '%s' is not held by this owner (id %llu) through "
                       "this handle",
                       l->name, (unsigned long long)tid);
    }
    if (atomic_load(&h->lost)) {
        rlk_hold_stop_renewal(l, h);
        return rlk_extend_lost(l, h);
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.hold = h;
    rlk_sync_clear();
    int r = l->single->extend(&a, lease_ms);
    int acked = 0, n = 0;
    if (r == RLK_NOT_HELD && rlk_sync_short(&acked, &n)) {
        /* A node whose replicas did not acknowledge may have lost its data without knowing yet
         * that it was replaced: its "not held" is not believed, and the hold stays recorded. */
        return rlk_sync_error(acked, n, "extend of lock", l->name);
    }
    if (r == RLK_NOT_HELD) {
        rlk_hold_stop_renewal(l, h);
        return rlk_extend_lost(l, h);
    }
    if (r < 0) {
        return r;
    }
    if (rlk_sync_short(&acked, &n)) {
        rlk_obs_replica_sync_failed(l->client, rlk_obs_kind_of((rlock_kind)l->kind), l->name,
                                    a.owner, RLOCK_EREPLICA);
        return rlk_sync_error(acked, n, "extend of lock", l->name);
    }
    /* A partial release keeps the longest lease granted (rlock_unlock): the extension counts. */
    if (!rlk_wd_active(l->client->watchdog, &h->wd) && lease_ms > h->lease_ms) {
        h->lease_ms = lease_ms;
    }
    return RLOCK_OK;
}
