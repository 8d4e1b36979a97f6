/*
 * The queries of single-key locks on the lock hash (EXISTS, HEXISTS, HGET, PTTL), the calling
 * owner's token from its record, and the destruction of a handle's records.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "lock_hold.h"
#include "lock_query.h"
#include "replica.h"

int rlk_reply_int(const redisReply *r, long long *v, const char *what)
{
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_EPROTO, "%s: expected an integer reply, got type %d", what,
                   r ? r->type : -1);
}

/* Runs a read-only command on the lock key with one field (or none) and returns its reply. */
static int hold_query(rlock *l, const char *cmd, const char *field, size_t flen, redisReply **out)
{
    rlk_args a;
    rlk_args_init(&a);
    rlk_args_adds(&a, cmd);
    rlk_args_add(&a, l->name, l->name_len);
    if (field != NULL) {
        rlk_args_add(&a, field, flen);
    }
    int r = rlk_cmd(l->client, RLK_IDEMPOTENT, &a, out);
    if (r == RLOCK_OK && (*out)->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "%s on '%s': %s", cmd, l->name, (*out)->str);
        freeReplyObject(*out);
        *out = NULL;
    }
    return r;
}

/* The hold count of a's field on Redis (HGET: 0 when the field or the key is gone), or a negative
 * error. */
int rlk_field_count(rlk_acq *a)
{
    rlock *l = a->lock;
    redisReply *rep = NULL;
    int r = hold_query(l, "HGET", a->field, a->field_len, &rep);
    if (r != RLOCK_OK || rep == NULL) {
        return r != RLOCK_OK ? r : rlk_err(RLOCK_EPROTO, "HGET of a hold count: no reply");
    }
    int count = 0;
    if (rep->type == REDIS_REPLY_STRING) {
        count = (int)strtol(rep->str, NULL, 10);
    } else if (rep->type != REDIS_REPLY_NIL) {
        r = rlk_err(RLOCK_EPROTO, "HGET of a hold count: unexpected reply type %d", rep->type);
    }
    freeReplyObject(rep);
    return r ? r : count;
}

/* The hold count by hold_count.lua with the replicas' WAIT behind; *trusted = 0 (and the last
 * error says why) when fewer replicas acknowledged than the node is counted to have. */
static int field_count_synced(rlk_acq *a, int *trusted)
{
    rlock *l = a->lock;
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_init(&args);
    rlk_args_add(&args, a->field, a->field_len);
    redisReply *rep = NULL;
    long long v = 0;
    rlk_sync_clear();
    int r = rlk_script(l->client, RLK_SCRIPT_HOLD_COUNT, RLK_SYNCED | RLK_IDEMPOTENT, &keys, &args,
                       &rep);
    r = r ? r : rlk_reply_int(rep, &v, "hold_count.lua");
    freeReplyObject(rep);
    int acked = 0, n = 0;
    if (r == RLOCK_OK && rlk_sync_short(&acked, &n)) {
        (void)rlk_sync_error(acked, n, "the hold count of lock", l->name);
        *trusted = 0;
    }
    rlk_sync_clear();
    return r ? r : (int)v;
}

int rlk_field_count_settle(rlk_acq *a, int *trusted)
{
    *trusted = 1;
    return rlk_sync_target(a->client) > 0 ? field_count_synced(a, trusted) : rlk_field_count(a);
}

int rlk_hash_is_locked(rlock *l)
{
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "EXISTS", NULL, 0, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "EXISTS");
    freeReplyObject(rep);
    return r ? r : (v != 0);
}

int rlk_single_is_held(rlock *l)
{
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    if (h != NULL && atomic_load(&h->lost)) {
        return 0;
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "HEXISTS", a.field, a.field_len, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "HEXISTS");
    freeReplyObject(rep);
    if (r == RLOCK_OK && v == 0 && h != NULL && h->count > 0 && !h->unsure) {
        /* Redis says the hold is gone (its lease ran out unnoticed, or the key was deleted):
         * the record says so too, so that rlock_token() answers 0 from now on (rlock.h). The
         * next unlock then reports RLOCK_ELOST without a round trip, as after a watchdog loss. */
        atomic_store(&h->lost, 1);
    }
    return r ? r : (v != 0);
}

int rlk_single_hold_count(rlock *l)
{
    rlk_acq a;
    rlk_acq_init(&a, l);
    return rlk_field_count(&a);
}

int64_t rlk_single_ttl(rlock *l)
{
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "PTTL", NULL, 0, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "PTTL");
    freeReplyObject(rep);
    return r ? RLOCK_TTL_ERROR(r) : (int64_t)v;
}

uint64_t rlk_single_token(rlock *l)
{
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    /* An unsure last hold may have been released: its token is no longer claimed. */
    int maybe_released = h != NULL && (h->unsure & RLK_UNSURE_RELEASE);
    return h != NULL && h->count - maybe_released > 0 && !atomic_load(&h->lost) ? h->token : 0;
}

void rlk_single_destroy(rlock *l)
{
    rlk_hold_forget_all(l);
    if (l->single != NULL && l->single->impl_free != NULL) {
        l->single->impl_free(l->impl);
    }
    l->impl = NULL;
}
