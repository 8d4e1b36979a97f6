/*
 * The fair lock: Redisson's RFairLock data, with the queue's costs and failure modes fixed.
 *
 * Data (byte for byte Redisson's): the lock hash at `name` (owner "<uuid>:<tid>" -> hold count,
 * PEXPIRE lease), the waiter queue `redisson_lock_queue:{name}` (a list of owners in arrival
 * order), the waiter zset `redisson_lock_timeout:{name}` (owner -> deadline in epoch ms) and one
 * channel per waiting thread, `redisson_lock__channel:{name}:<owner>`. A release publishes "0"
 * on the channel of the first waiter only. Fencing tokens: `redisson_lock_token:{name}` is
 * incremented whenever the lock is taken from free; a re-entry keeps the hold's token.
 *
 * What differs from Redisson, and why:
 *  - A zset score is a liveness deadline, not a turn estimate: server now + waiter_timeout_ms,
 *    refreshed by the watchdog thread every third of that (fair_heartbeat.lua, batched with the
 *    other renewals) and by every attempt of the waiter. Nothing ever has to shift the other
 *    waiters' scores, so a grant (LINDEX, ZSCORE, LPOP, ZREM, HSET, PEXPIRE, INCR, PUBLISH to the
 *    next waiter) and an enqueue (ZADD, RPUSH) are O(log N) in the number of waiters;
 *    Redisson's ZINCRBY over every waiter was O(N) per grant and per give-up.
 *  - All deadlines come from the server's clock (TIME inside the scripts), never a client's.
 *  - A waiter whose process died stops heartbeating; within waiter_timeout_ms plus one heartbeat
 *    period of any live waiter of the lock, the heartbeat script sweeps it out of the zset and the
 *    list wherever it stands (LREM: one scan inside Redis per dead waiter, each removed once),
 *    and wakes the new first waiter. Dead heads are also dropped by every acquire and release.
 *    Redisson kept a dead waiter for its whole wait (5 minutes by default) and only ever looked
 *    at the head.
 *  - A waiter that gives up (its wait elapsed, or an error ended the wait) leaves the list and
 *    the zset before rlock_try_lock() returns, retrying through a transient Redis error (such as
 *    CLIENT PAUSE WRITE, Redisson #5019) for up to waiter_timeout_ms, after which its entry has
 *    expired anyway. If it was first in line while the lock was free, the hand-off passes on.
 *    The list removal is LPOP/RPOP when the waiter is first or last, else one LREM that stops at
 *    the waiter: Redis lists have no O(log N) removal by value, and the spec wants the entry out
 *    of the list (a tombstone would stay visible, and a tombstone at the head would stall a
 *    Redisson client, whose purge stops at a head without a score). LREM is a single command
 *    scanning inside Redis, not per-waiter script work.
 *  - try_lock(0) never joins the queue; like Redisson it does not take a free lock while another
 *    live waiter is first in line.
 *  - fair_wait_ms is not used: a waiter stays queued for as long as it waits and is alive.
 *
 * Whoever changes who is first in line (a grant, a give-up, dropping dead heads) publishes "0"
 * to the new first waiter, so the first waiter's wait bound is always re-armed on the current
 * holder's lease; a release notifies only the first waiter (no thundering herd). One exception:
 * a release's direct grant (below) does not notify a next waiter registered for grants, whose
 * wait bound is capped at waiter_timeout_ms instead (one attempt fewer per hand-off).
 *
 * Direct grants (issue 18): an rlock waiter registers, when it queues, the TTL a grant must give
 * it (rlock_lock_waiters:{name}:grants, lock.h rlk_grant_ttl). A full release whose first live
 * waiter has one grants it the lock inside fair_release.lua and tells it on its channel ("grant
 * <token> <wait> <owner>"), so the waiter returns without an attempt of its own; a grant whose
 * message is not seen is found by the waiter's next attempt or by its give-up. Redisson waiters
 * register nothing and are notified as before.
 *
 * Mixed queues (rlock and Redisson clients on one fair lock) keep mutual exclusion, because both
 * take the lock only through the hash and respect each other's first waiter, and each wakes the
 * other's waiters on their own channels. Strict arrival order can be lost in four places:
 *  - Redisson's grant and give-up subtract its wait (fairLockWaitTimeout, 300 s by default) from
 *    every score. An rlock waiter's score then lies in the past until its next heartbeat (at most
 *    waiter_timeout_ms/3 later); a purge in that window (any client's acquire or release when the
 *    waiter is first, or rlock's sweep) drops it. The heartbeat then finds it gone and wakes it,
 *    and it joins again at the tail: it loses its place, and waits at most one heartbeat period
 *    longer than it should to re-join.
 *  - A Redisson waiter's deadline is its predecessor's deadline + its wait, on its own clock;
 *    rlock drops it (as dead) when that passes on the server's clock, so clock skew between the
 *    Java host and Redis shifts when that happens.
 *  - A Redisson waiter that died blocks the queue until its deadline passes (minutes), as in
 *    Redisson; rlock cannot tell a slow Redisson waiter from a dead one before that.
 *  - Redisson does not notify the next waiter when it grants, so an rlock waiter that saw the lock
 *    free with a Redisson waiter first re-attempts after at most waiter_timeout_ms (its wait bound
 *    is capped there) rather than on a notification.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock.h"
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

/* Decodes fair_acquire's reply: 1 acquired, 0 busy (*joined = 1 if appended just now). */
static int fair_attempt_reply(rlk_acq *a, redisReply *r, int *joined)
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

/* The attempt's call (fair_acquire.lua's KEYS and ARGV). */
static void fair_attempt_call(rlk_acq *a, rlk_args *keys, rlk_args *args)
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
    /* The grant a release may make to this waiter (lock.h, rlk_grant_ttl), for this lock call;
     * and whether it waits already (wait_begin ran), when its own field means granted. */
    rlk_args_addi(args, rlk_grant_ttl(a));
    rlk_args_addi(args, (int64_t)a->wait_id);
    rlk_args_adds(args, a->scratch != NULL ? "1" : "0");
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
    int rc = fair_attempt_reply(a, r, &joined);
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

    fair_queue_keys(a->lock, &keys);
    fair_grant_keys(a->lock, &keys);
    rlk_args_init(&args);
    rlk_args_add(&args, a->owner, a->owner_len);
    rlk_args_adds(&args, "0");
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

    fair_queue_keys(a->lock, &keys);
    if (rlk_grants_on(a->client)) {
        fair_grant_keys(a->lock, &keys); /* without them the release grants nothing */
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, a->lease_ms);
    rlk_args_add(&args, a->owner, a->owner_len);
    rlk_args_adds(&args, "0");
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

static const rlk_single_ops fair_single = {
    .attempt = fair_attempt,
    .channel = fair_channel,
    .wait_begin = fair_wait_begin,
    .wait_end = fair_wait_end,
    .release = fair_release,
    .renew = &fair_hold_renew,
    .attempt_format = fair_attempt_format,
    .attempt_reply = fair_attempt_done,
};

static void fair_impl_free(fair_impl *f)
{
    if (f != NULL) {
        rlk_buf_free(&f->queue);
        rlk_buf_free(&f->zset);
        rlk_buf_free(&f->token);
        rlk_buf_free(&f->channel);
        rlk_buf_free(&f->grant);
        free(f);
    }
}

static void fair_destroy(rlock *l)
{
    fair_impl_free(fair_of(l));
    l->impl = NULL;
    rlk_single_destroy(l);
}

static const rlk_lock_ops fair_ops = {
    .acquire = rlk_single_acquire,
    .unlock = rlk_single_unlock,
    .force_unlock = fair_force_unlock,
    .is_locked = rlk_hash_is_locked,
    .is_held = rlk_single_is_held,
    .hold_count = rlk_single_hold_count,
    .ttl = rlk_single_ttl,
    .token = rlk_single_token,
    .destroy = fair_destroy,
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
