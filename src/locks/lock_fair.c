/*
 * The fair lock (RLOCK_FAIR): Redisson's RFairLock data, a FIFO queue whose zset scores are
 * liveness deadlines on the server's clock (kept fresh by heartbeats), give-ups that leave the
 * queue before returning, dead waiters swept out, a release that wakes or directly grants the
 * first waiter only. docs/locks/fair.md explains the design, where it differs from Redisson and
 * where a queue shared with Redisson clients can lose order. Static helpers are named fair_*.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "lock.h"
#include "lock_extend.h"
#include "lock_fair.h"
#include "lock_hold.h"
#include "lock_wait.h"
#include "release_reply.h"
#include "scripts.h"
#include "lock_heartbeat.h"

/* Names derived once per handle from the lock name (immutable while the handle lives). */
typedef struct fair_impl {
    rlk_buf queue;   /* redisson_lock_queue:{name} */
    rlk_buf zset;    /* redisson_lock_timeout:{name} */
    rlk_buf token;   /* redisson_lock_token:{name} */
    rlk_buf channel; /* redisson_lock__channel:{name}; a waiter's channel adds ":<owner>" */
    rlk_buf grant;   /* rlock_lock_waiters:{name}:grants, the grant TTLs of rlock waiters */
} fair_impl;

static fair_impl *fair_of(const rlock *l)
{
    return (fair_impl *)l->impl;
}

static int fair_channel(rlk_acq *a, rlk_buf *ch)
{
    const fair_impl *f = fair_of(a->lock);
    int rc = rlk_buf_append(ch, f->channel.p, f->channel.len);

    rc = rc != RLOCK_OK ? rc : rlk_buf_appends(ch, ":");
    return rc != RLOCK_OK ? rc : rlk_buf_append(ch, a->owner, a->owner_len);
}

/* A queued waiter's liveness heartbeat (lock_heartbeat.h), its member being its owner. When
 * the heartbeat script finds the entry gone, it wakes the waiter on its channel, and the waiter's
 * next attempt joins again and restarts the heartbeat (fair_attempt_done). */
static const rlk_renew_class fair_waiter_class = {
    .script = RLK_SCRIPT_FAIR_HEARTBEAT,
    .describe = rlk_waiter_hb_describe,
    .lost = rlk_waiter_hb_lost,
    .release = rlk_waiter_hb_release,
};

/* Keys shared by the release, force release and leave scripts. */
static void fair_queue_keys(const rlock *l, rlk_args *keys)
{
    const fair_impl *f = fair_of(l);

    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, f->queue.p, f->queue.len);
    rlk_args_add(keys, f->zset.p, f->zset.len);
    rlk_args_add(keys, f->channel.p, f->channel.len);
}

/* Appends the keys a release or a give-up needs to grant, or to find a grant: the fencing
 * counter and the grant hash. */
static void fair_grant_keys(const rlock *l, rlk_args *keys)
{
    const fair_impl *f = fair_of(l);

    rlk_args_add(keys, f->token.p, f->token.len);
    rlk_args_add(keys, f->grant.p, f->grant.len);
}

void rlk_fair_leave_args(rlk_acq *a, int grants, rlk_args *keys, rlk_args *args)
{
    fair_queue_keys(a->lock, keys);
    if (grants) {
        fair_grant_keys(a->lock, keys);
    }
    rlk_args_init(args);
    rlk_args_add(args, a->owner, a->owner_len);
    rlk_args_adds(args, "0");
}

void rlk_fair_release_args(rlk_acq *a, rlk_args *keys, rlk_args *args)
{
    fair_queue_keys(a->lock, keys);
    if (rlk_grants_on(a->client)) {
        fair_grant_keys(a->lock, keys); /* without them the release grants nothing */
    }
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->owner, a->owner_len);
    rlk_args_adds(args, "0");
}

int rlk_fair_attempt_reply(rlk_acq *a, const redisReply *r, int *joined)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        return rlk_err(RLOCK_EPROTO, "fair_acquire on '%s': unexpected reply shape", a->lock->name);
    }
    if (r->element[0]->integer == 1) {
        a->token = (uint64_t)r->element[1]->integer;
        return 1;
    }
    a->ttl_ms = r->element[1]->integer;
    *joined = r->elements > 2 && r->element[2]->type == REDIS_REPLY_INTEGER &&
              r->element[2]->integer == 1;
    return 0;
}

void rlk_fair_attempt_args(rlk_acq *a, int64_t grant_ttl, int waiting, rlk_args *keys,
                           rlk_args *args)
{
    const fair_impl *f = fair_of(a->lock);

    rlk_args_init(keys);
    rlk_args_add(keys, a->lock->name, a->lock->name_len);
    rlk_args_add(keys, f->queue.p, f->queue.len);
    rlk_args_add(keys, f->zset.p, f->zset.len);
    rlk_args_add(keys, f->token.p, f->token.len);
    rlk_args_add(keys, f->channel.p, f->channel.len);
    rlk_args_add(keys, f->grant.p, f->grant.len);
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->owner, a->owner_len);
    rlk_args_addi(args, a->client->opts.waiter_timeout_ms);
    rlk_args_adds(args, a->may_queue ? "1" : "0");
    rlk_args_addi(args, grant_ttl);
    rlk_args_addi(args, (int64_t)a->wait_id);
    rlk_args_adds(args, waiting ? "1" : "0");
}

/* The attempt's call: the grant a release may make to this waiter (lock.h, rlk_grant_ttl), for
 * this lock call; and whether it waits already (wait_begin ran), when its own field means
 * granted. */
static void fair_attempt_call(rlk_acq *a, rlk_args *keys, rlk_args *args)
{
    rlk_fair_attempt_args(a, rlk_grant_ttl(a), a->scratch != NULL, keys, args);
}

static int fair_attempt_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_args keys;
    rlk_args args;

    fair_attempt_call(a, &keys, &args);
    return rlk_script_format(RLK_SCRIPT_FAIR_ACQUIRE, &keys, &args, cmd, len);
}

static int fair_attempt_done(rlk_acq *a, redisReply *r);

static int fair_attempt(rlk_acq *a)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;

    fair_attempt_call(a, &keys, &args);
    int rc = rlk_script(a->client, RLK_SCRIPT_FAIR_ACQUIRE, 0, &keys, &args, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rc = fair_attempt_done(a, r);
    freeReplyObject(r);
    return rc;
}

/* Decodes an attempt's reply and keeps the waiter's heartbeat going. */
static int fair_attempt_done(rlk_acq *a, redisReply *r)
{
    rlk_waiter_hb *w = a->scratch;
    int joined = 0;
    int rc = rlk_fair_attempt_reply(a, r, &joined);
    /* Still waiting, but the entry had gone (swept after missed heartbeats, or dropped after a
     * Redisson grant shifted every score) and this attempt put it back, or the heartbeat was
     * judged lost: beat again. A re-join always restarts the heartbeat, since the one that found
     * the entry gone may still be finishing (the cancel waits for it). */
    if (rc == 0 && w != NULL && (joined || !rlk_wd_active(a->client->watchdog, &w->wd))) {
        rc = rlk_waiter_hb_restart(a, w);
    }
    return rc;
}

/* Runs fair_leave.lua, retrying a failed call (the server may be paused or briefly away) until
 * it succeeds, the lock call's bound passes (rlk_pool_bound: its wait plus command_timeout_ms),
 * or the entry must have expired on its own: waiter_timeout_ms after the last heartbeat, which
 * has stopped before this is called. Returns 1 when the waiter turned out to be
 * granted the lock (rlk_leave_granted), 0 when it left, or the error of a leave that failed. */
static int fair_leave(rlk_acq *a)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    int64_t give_up = rlk_add_sat(rlk_now_ms(), a->client->opts.waiter_timeout_ms);
    int64_t bound = rlk_pool_bound_get(); /* the lock call's own end (rlk_pool_bound) */
    int64_t nap = 10;

    rlk_fair_leave_args(a, 1, &keys, &args);
    for (;;) {
        int rc = rlk_script(a->client, RLK_SCRIPT_FAIR_LEAVE, RLK_IDEMPOTENT, &keys, &args, &r);
        if (rc == RLOCK_OK) {
            int granted = rlk_leave_granted(a, r);
            freeReplyObject(r);
            return granted;
        }
        int64_t now = rlk_now_ms();
        if (rc != RLOCK_ECONN || atomic_load(&a->client->closed) || now >= give_up ||
            (bound != 0 && now >= bound)) {
            rlk_log(a->client, RLOCK_LOG_WARN,
                    "fair lock '%s': could not leave the queue (%s); "
                    "the entry expires after waiter_timeout_ms",
                    a->lock->name, rlock_last_error());
            return rc;
        }
        int64_t left = bound != 0 ? bound - now : nap;
        left = left < nap ? left : nap;
        struct timespec ts = {0, (long)(left > 0 ? left : 0) * 1000000L};
        nanosleep(&ts, NULL);
        nap = nap < 200 ? nap * 2 : 200;
    }
}

static int fair_wait_begin(rlk_acq *a)
{
    if (!a->may_queue) {
        return RLOCK_OK;
    }
    rlk_waiter_hb *w = NULL;
    int rc = rlk_waiter_hb_start(a, &fair_waiter_class, a->owner, a->owner_len, &w);
    if (rc != RLOCK_OK) {
        /* Granted as it left: the wait loop's wait_end finds nothing more to do. */
        (void)fair_leave(a);
        return rc;
    }
    a->scratch = w;
    return RLOCK_OK;
}

/* Ends a wait: the heartbeat stops before the entry goes, so it cannot be put back afterwards.
 * A granted waiter was taken off the queue by the grant itself; a give-up that finds a grant
 * reports it (1) for the wait loop to keep or pass on. */
static int fair_wait_end(rlk_acq *a, int acquired)
{
    rlk_waiter_hb *w = a->scratch;

    rlk_waiter_hb_stop(a, &w);
    a->scratch = NULL;
    if (!acquired && a->may_queue) {
        return fair_leave(a);
    }
    return 0;
}

static int fair_release(rlk_acq *a)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    long long v = 0;

    rlk_fair_release_args(a, &keys, &args);
    int rc = rlk_script(a->client, RLK_SCRIPT_FAIR_RELEASE, 0, &keys, &args, &r);
    rc = rc != RLOCK_OK ? rc : rlk_notify_reply(a->client, r, &v, "fair_release");
    freeReplyObject(r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    return v < 0 ? RLK_NOT_HELD : (int)v;
}

static int fair_force_unlock(rlock *l)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    long long v = 0;

    fair_queue_keys(l, &keys);
    rlk_args_init(&args);
    rlk_args_adds(&args, "0");
    int rc = rlk_script(l->client, RLK_SCRIPT_FAIR_FORCE_RELEASE, RLK_IDEMPOTENT, &keys, &args, &r);
    rc = rc != RLOCK_OK ? rc : rlk_notify_reply(l->client, r, &v, "fair_force_release");
    freeReplyObject(r);
    return rc != RLOCK_OK ? rc : (v == 1);
}

static const rlk_renew_class fair_hold_renew = {
    .script = RLK_SCRIPT_RENEW_HASH,
    .describe = rlk_hold_describe,
    .lost = rlk_hold_on_lost,
};

static void fair_impl_free(void *impl)
{
    fair_impl *f = impl;
    if (f != NULL) {
        rlk_buf_free(&f->queue);
        rlk_buf_free(&f->zset);
        rlk_buf_free(&f->token);
        rlk_buf_free(&f->channel);
        rlk_buf_free(&f->grant);
        free(f);
    }
}

static const rlk_single_ops fair_single = {
    .attempt = fair_attempt,
    .channel = fair_channel,
    .wait_begin = fair_wait_begin,
    .wait_end = fair_wait_end,
    .release = fair_release,
    .renew = &fair_hold_renew,
    .attempt_format = fair_attempt_format,
    .attempt_reply = fair_attempt_done,
    .extend = rlk_hash_extend,
    .impl_free = fair_impl_free,
};

static const rlk_lock_ops fair_ops = {
    RLK_SINGLE_LOCK_OPS(fair_force_unlock, rlk_hash_is_locked),
};

static fair_impl *fair_impl_new(const char *name, size_t len)
{
    fair_impl *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        return NULL;
    }
    rlk_buf_init(&f->queue);
    rlk_buf_init(&f->zset);
    rlk_buf_init(&f->token);
    rlk_buf_init(&f->channel);
    rlk_buf_init(&f->grant);
    int rc = rlk_prefix_name(&f->queue, "redisson_lock_queue", name, len);
    rc = rc != RLOCK_OK ? rc : rlk_prefix_name(&f->zset, "redisson_lock_timeout", name, len);
    rc = rc != RLOCK_OK ? rc : rlk_prefix_name(&f->token, "redisson_lock_token", name, len);
    rc = rc != RLOCK_OK ? rc : rlk_prefix_name(&f->channel, "redisson_lock__channel", name, len);
    rc = rc != RLOCK_OK ? rc : rlk_grant_name(&f->grant, name, len);
    if (rc != RLOCK_OK) {
        fair_impl_free(f);
        return NULL;
    }
    return f;
}

rlock *rlk_fair_open(rlock_client *c, const char *name)
{
    rlock *l = rlk_single_new(c, RLOCK_FAIR, name, &fair_ops, &fair_single);

    if (l == NULL) {
        return NULL;
    }
    l->impl = fair_impl_new(l->name, l->name_len);
    if (l->impl == NULL) {
        rlock_free(l);
        rlk_err(RLOCK_ENOMEM, "cannot allocate the fair lock's key names");
        return NULL;
    }
    return l;
}
