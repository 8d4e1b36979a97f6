/*
 * The shared wait of single-key lock types (lock.h): after a busy first attempt, join the lock's
 * channel, arm the next attempt for the subscriber thread, sleep until a wake-up and attempt
 * again, until granted, out of time or failed. It also holds the waiter's side of direct grants
 * (a release that grants this waiter the lock, issue 18) and the recovery of a wait whose attempt
 * failed on the connection or whose grant too few replicas acknowledged. The hold that a grant
 * creates is recorded by lock_acquire.c, which calls rlk_wait_loop() and knows nothing of its
 * states.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "error.h"
#include "lock.h"
#include "lock_wait.h"
#include "pool.h"
#include "pubsub_armed.h"
#include "replica.h"

/* How waits ended, for tests and benchmarks (rlk_grant_stats_get). */
static atomic_uint_fast64_t stat_believed, stat_confirmed, stat_by_attempt, stat_undone;

void rlk_grant_stats_get(rlk_grant_stats *out)
{
    out->believed = atomic_load(&stat_believed);
    out->confirmed = atomic_load(&stat_confirmed);
    out->by_attempt = atomic_load(&stat_by_attempt);
    out->undone = atomic_load(&stat_undone);
}

uint64_t rlk_wait_id_next(void)
{
    static atomic_uint_fast64_t next = 1;
    return (uint64_t)atomic_fetch_add(&next, 1);
}

int rlk_grants_on(const rlock_client *c)
{
    (void)c;
    return 1;
}

int64_t rlk_grant_ttl(const rlk_acq *a)
{
    int64_t wt = a->client->opts.waiter_timeout_ms;
    if (!a->may_queue || !rlk_grants_on(a->client)) {
        return 0;
    }
    return a->lease_ms < wt ? a->lease_ms : wt;
}

int rlk_leave_granted(rlk_acq *a, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        return 0;
    }
    a->token = (uint64_t)r->element[1]->integer;
    a->granted_ttl = rlk_grant_ttl(a);
    return 1;
}

/* Reads what the armed attempt carried behind it (the replicas' WAIT, rlk_arm_format) and notes
 * it as scripts.c notes a synced script's, so that rlk_keep_synced() judges the attempt's grant.
 * Replicas counted since the attempt was formatted are waited for too: fewer acknowledgements
 * than the count now are short. A tail that could not be read counts as no acknowledgement. */
static void rlk_armed_sync(rlk_acq *a, rlk_armed *armed)
{
    rlk_sync s = {&a->client->replicas, a->arm_n, 0, 0};
    rlk_conn *conn = rlk_armed_take_conn(armed);
    if (conn != NULL) {
        char saved[256];
        snprintf(saved, sizeof(saved), "%s", rlock_last_error());
        int r = rlk_sync_read(a->client, conn, &s);
        rlk_pool_return(a->client->pool, conn, r != RLOCK_OK);
        s.acked = r == RLOCK_OK ? s.acked : 0;
        rlk_err_restore(saved);
    } else {
        s.acked = s.n;
    }
    int now = rlk_sync_target(a->client);
    s.n = now > s.n ? now : s.n;
    rlk_sync_note(&s);
}

/* Decodes the reply to the attempt the subscriber thread sent for this waiter, as attempt()
 * would. A NOSCRIPT reply means the script did not run, so the waiter simply attempts itself
 * (which loads it). */
static int armed_reply(rlk_acq *a, rlk_armed *armed)
{
    const rlk_single_ops *ops = a->lock->single;
    redisReply *rep = rlk_armed_take_reply(armed);
    rlk_armed_sync(a, armed);
    int r;
    if (rlk_reply_is_noscript(rep)) {
        r = ops->attempt(a);
    } else if (rep->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "lock attempt on '%s': %s", a->lock->name, rep->str);
    } else {
        r = ops->attempt_reply(a, rep);
    }
    freeReplyObject(rep);
    return r;
}

/* The armed attempt's request: the type's attempt and, for a client that syncs to replicas,
 * the WAIT that scripts.c would send behind it (a->arm_n: the replicas it waits for). Returns
 * the number of requests behind the attempt (0 or 1), or an error with *cmd NULL. */
static int rlk_arm_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_sync s = {0};
    *cmd = NULL;
    int r = a->lock->single->attempt_format(a, cmd, len);
    r = r ? r : rlk_sync_format(a->client, &s, cmd, len);
    if (r >= 0) {
        a->arm_n = s.n;
    } else {
        free(*cmd);
        *cmd = NULL;
    }
    return r;
}

/* The next attempt, formatted once for the whole wait (its arguments do not change), so that
 * the subscriber thread can send it the moment the notification arrives. NULL when the type
 * cannot arm or there is no memory to: the waiter then waits as without arming. */
static rlk_armed *wait_arm(rlk_acq *a)
{
    char *cmd = NULL;
    size_t len = 0;
    rlk_armed *armed = NULL;
    int tail = a->lock->single->attempt_format != NULL ? rlk_arm_format(a, &cmd, &len) : -1;
    if (tail >= 0 && rlk_armed_new(cmd, len, &armed) == RLOCK_OK) {
        rlk_armed_set_tail(armed, tail);
        rlk_armed_set_tag(armed, a->field, a->field_len, a->wait_id); /* named wake-ups */
    }
    return armed;
}

/* Gives back a grant (or re-entry) that fewer replicas acknowledged than the master has: a
 * failover to one of them would forget it while this thread believed it held the lock. The
 * release waits for no replica (it would fall short the same way). A give-back that failed
 * leaves the grant standing, as a lost reply does: a->back_failed tells the wait to give it back
 * again before its next attempt, which would otherwise re-enter it (a hold that no unlock ends,
 * and the token of a grant nobody saw), and the call's caller to mark the record unsure. */
static int undo_unsynced(rlk_acq *a)
{
    int acked = 0, n = 0;
    if (!rlk_sync_short(&acked, &n)) {
        return 0;
    }
    atomic_fetch_add(&stat_undone, 1);
    rlk_obs_replica_sync_failed(a->client, rlk_obs_kind_of((rlock_kind)a->lock->kind),
                                a->lock->name, a->owner, RLOCK_EREPLICA);
    rlk_sync_suppress(1);
    int back = a->lock->single->release(a);
    rlk_sync_suppress(0);
    a->back_failed = back < 0;
    return rlk_sync_error(acked, n, "lock", a->lock->name);
}

/* A grant (r == 1) stays only when its replicas acknowledged it; otherwise RLOCK_EREPLICA. */
int rlk_keep_synced(rlk_acq *a, int r)
{
    int u = r == 1 ? undo_unsynced(a) : 0;
    return u ? u : r;
}

/* Pauses a waiter after a connection failure: 10 ms, doubling up to 1 s, never past its deadline,
 * in slices that notice rlock_client_interrupt() and a closed client. Returns 1 to try again, 0
 * when the wait ends instead. */
static int wait_pause(rlk_acq *a, int64_t deadline, int64_t *pause)
{
    int64_t now = rlk_now_ms();
    if (now >= deadline) {
        return 0;
    }
    if (*pause == 0) {
        rlk_log(a->client, RLOCK_LOG_WARN,
                "waiting for lock '%s': %s; trying again while the wait lasts", a->lock->name,
                rlock_last_error());
    }
    *pause = *pause == 0 ? 10 : (*pause >= 500 ? 1000 : *pause * 2);
    int64_t until = rlk_add_sat(now, *pause);
    until = until < deadline ? until : deadline;
    while ((now = rlk_now_ms()) < until) {
        if (rlk_pubsub_interrupted(a->client->pubsub) || rlk_client_check(a->client) != RLOCK_OK) {
            return 0;
        }
        int64_t step = until - now < 50 ? until - now : 50;
        if (rlk_cancel_sleep(a->cancel, now + step)) {
            return 0; /* the token fired: rlk_wait_recover() reports it */
        }
    }
    return 1;
}

/* Ends the wait's grant identity before it gives a grant back: a new wait id, which the next
 * attempt registers on Redis (the armed one too, formatted again) and which a grant's message
 * must name to be believed (pubsub_armed.c). A grant made for the old id may be given back by
 * the release that follows, so its message, read now or later, is never taken for a hold; a
 * grant for the old id made after that release is found by the next attempt instead (its own
 * field in the lock hash). Without memory for the new attempt, the armed one keeps registering
 * the old id: its grants then reach the waiter only through its own attempts. */
static void wait_rewait(rlk_acq *a, rlk_sub *sub, rlk_armed *armed)
{
    char *cmd = NULL;
    size_t len = 0;
    a->wait_id = rlk_wait_id_next();
    if (armed == NULL) {
        return;
    }
    int tail = rlk_arm_format(a, &cmd, &len);
    rlk_armed_rewait(a->client->pubsub, sub, armed, cmd, len, tail, a->wait_id);
}

/* A waiter whose attempt (or wait) failed with a connection error, or whose grant fewer replicas
 * acknowledged (given back already), keeps waiting while it has time left: a failover or a
 * restart must not end a wait that would have been granted after it. An attempt that failed on
 * the connection may have been granted with its reply lost, and a release may have granted the
 * lock to this waiter meanwhile: the waiter gives whatever it holds back (the type's release of
 * its own field changes nothing when there is none) under a new grant identity
 * (wait_rewait), then attempts again; the subscriber meanwhile reconnects and its new
 * SUBSCRIBE confirmation wakes the wait. Returns the outcome to go on with: a grant, busy (0),
 * or the error that ends the wait. */
int rlk_wait_recover(rlk_acq *a, rlk_sub *sub, rlk_armed *armed, int r, int64_t deadline)
{
    int64_t pause = 0;
    if (r == 1 && rlk_sync_target(a->client) > 0) {
        wait_rewait(a, sub, armed); /* rlk_keep_synced() may give this grant back */
    }
    r = rlk_keep_synced(a, r);
    while ((r == RLOCK_ECONN || r == RLOCK_EREPLICA) && wait_pause(a, deadline, &pause)) {
        wait_rewait(a, sub, armed);
        int back = r == RLOCK_ECONN || a->back_failed ? a->lock->single->release(a) : RLK_NOT_HELD;
        if (back == 0 || back == 1) {
            rlk_log(a->client, RLOCK_LOG_INFO,
                    "waiting for lock '%s': gave back a grant whose reply was lost", a->lock->name);
        }
        a->back_failed = a->back_failed && back < 0;
        r = rlk_keep_synced(a, back < 0 ? back : a->lock->single->attempt(a));
    }
    if (r < 0 && pause > 0 && rlk_cancel_is_fired(a->cancel)) {
        return rlk_cancel_check(a->cancel, "waiting for lock", a->lock->name);
    }
    if (r < 0 && pause > 0 && rlk_pubsub_interrupted(a->client->pubsub)) {
        return rlk_err(RLOCK_ETIMEDOUT, "waiting for lock '%s' was interrupted", a->lock->name);
    }
    return r;
}

/* A grant that the give-up found was never confirmed by an attempt: a client that syncs to
 * replicas renews it (PEXPIRE to the lease, a write of its own) with the replicas' WAIT behind,
 * and keeps it only when they acknowledged (rlk_keep_synced gives it back otherwise). */
static int rlk_confirm_late(rlk_acq *a)
{
    if (rlk_sync_target(a->client) == 0) {
        return 1;
    }
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, a->lock->name, a->lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, a->lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    redisReply *rep = NULL;
    int r = rlk_script(a->client, RLK_SCRIPT_RENEW_HASH, RLK_SYNCED, &keys, &args, &rep);
    if (r == RLOCK_OK) {
        r = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
            rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[0]->integer == 1;
        freeReplyObject(rep);
    }
    return rlk_keep_synced(a, r);
}

/* A release granted the lock to this waiter as it gave up (wait_end() found it so). A wait that
 * ran out (r == 0) takes the grant: the caller holds the lock (rlock.h), once its replicas
 * acknowledged it when the client syncs. A wait that ended with an error gives the grant on, so
 * that the lock is not left held by a thread that returns an error; that release grants or wakes
 * the next waiter. */
static int wait_granted_late(rlk_acq *a, int r)
{
    if (r == 0) {
        return rlk_confirm_late(a);
    }
    char saved[256];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    (void)a->lock->single->release(a);
    rlk_err_restore(saved);
    return r;
}

/* Waits for wake-ups and re-attempts until acquired, the deadline passes, or an error.
 * wait_end() runs on every way out, also when joining the channel or wait_begin() failed: the
 * first attempt may already have queued the waiter (fair queue, waiting writers), and a waiter
 * that gives up must have left every queue when the call returns. */
int rlk_wait_loop(rlk_acq *a, int64_t deadline)
{
    rlock *l = a->lock;
    rlk_pubsub *ps = l->client->pubsub;
    rlk_buf ch;
    rlk_buf_init(&ch);
    rlk_sub *sub = NULL;
    int r = l->single->channel(a, &ch);
    r = r                            ? r
        : l->single->channel_pattern ? rlk_sub_join_pattern(ps, ch.p, ch.len, &sub)
                                     : rlk_sub_join(ps, ch.p, ch.len, &sub);
    rlk_buf_free(&ch);
    if (r == RLOCK_OK && l->single->wait_begin != NULL) {
        r = l->single->wait_begin(a);
    }
    rlk_armed *armed = r == RLOCK_OK ? wait_arm(a) : NULL;
    /* A subscription confirmed since the first attempt went out may have come after a release it
     * did not hear (its wake-up, or a grant to this waiter, published before the confirmation),
     * and a joiner of a live subscription gets no permit: the wait then attempts before it
     * sleeps. Rare (a confirmation inside one round trip), and it makes the joins race-free. */
    rlk_armed_begin(ps, sub, armed);
    int again = rlk_pubsub_confirms(ps) != a->confirms;
    while (r == RLOCK_OK) {
        int64_t now = rlk_now_ms();
        if (now >= deadline) {
            break;
        }
        int64_t bound = deadline == INT64_MAX ? -1 : deadline - now;
        if (a->ttl_ms >= 0 && (bound < 0 || a->ttl_ms < bound)) {
            bound = a->ttl_ms > 0 ? a->ttl_ms : 1;
        }
        int w = again ? RLK_WAIT_WOKEN : rlk_sub_wait_cancel(ps, sub, bound, armed, a->cancel);
        again = 0;
        if (w == RLK_WAIT_CANCELED) {
            /* wait_end below leaves every queue; a grant it finds is given on. */
            r = rlk_cancel_check(a->cancel, "waiting for lock", l->name);
            break;
        }
        if (w == RLK_WAIT_INTERRUPTED) {
            r = rlk_err(RLOCK_ETIMEDOUT, "waiting for lock '%s' was interrupted", l->name);
            break;
        }
        /* A client that syncs to replicas believes no grant's message: the grant is confirmed
         * by an attempt (the armed one, or its own) that finds it and whose WAIT follows. */
        int confirming = w == RLK_WAIT_GRANTED || (w == RLK_WAIT_REPLY && rlk_armed_token(armed));
        if (w == RLK_WAIT_GRANTED && rlk_sync_target(l->client) == 0) {
            /* A release granted the lock to this waiter and said so: no command to send. */
            a->token = rlk_armed_token(armed);
            a->granted_ttl = rlk_grant_ttl(a);
            atomic_fetch_add(&stat_believed, 1);
            r = 1;
            break;
        }
        if (w == RLK_WAIT_REPLY) {
            r = armed_reply(a, armed);
        } else {
            r = w < 0 ? w : rlk_client_check(l->client);
            r = r ? r : l->single->attempt(a);
        }
        r = rlk_wait_recover(a, sub, armed, r, deadline);
        if (r == 1) {
            atomic_fetch_add(confirming ? &stat_confirmed : &stat_by_attempt, 1);
        }
    }
    rlk_armed_end_wait(ps, sub, armed);
    rlk_armed_free(armed);
    char saved[256];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    int left = l->single->wait_end != NULL ? l->single->wait_end(a, r == 1) : 0;
    if (left == 1) {
        r = wait_granted_late(a, r);
    } else if (left < 0) {
        /* The call reports why its wait ended, not the give-up's failure, which the thread's
         * next lock or unlock settles (RLK_UNSURE_LEAVE, lock_release.c). */
        a->leave_failed = 1;
        rlk_err_restore(saved);
    }
    rlk_sub_leave(ps, sub);
    return r;
}
