/*
 * RedLock: the Redlock algorithm of redis.io over n reentrant locks on n independent servers.
 * An attempt sends to every server before reading a reply (redlock_round.c), needs n/2+1 grants
 * and validity left on the monotonic clock, writes the largest fencing token back, and otherwise
 * releases everywhere and retries after a random pause. Holds extend rlk_hold (redlock_hold).
 * docs/locks/redlock.md explains the design. Static helpers are named redlock_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "lock_hold.h"
#include "lock_lost.h"
#include "lock_observe.h"
#include "pubsub.h"
#include "lock_redlock.h"
#include "lock_redlock_decode.h"
#include "replica.h"
#include "redlock_round.h"
#include "scripts.h"

typedef struct redlock_hold redlock_hold;

/* A watchdog entry for one member's grant. */
typedef struct redlock_member_wd {
    rlk_wd_entry wd;
    redlock_hold *hold;
    size_t idx;
    int registered;
} redlock_member_wd;

struct redlock_hold {
    rlk_hold base;       /* count, token, lost (the group lost its majority), lease_ms */
    int64_t valid_until; /* monotonic ms; INT64_MAX under the watchdog */
    int busy_at;         /* last attempt: first server held by another (-1: none) */
    int granted_n;
    unsigned char granted[RLK_REDLOCK_MAX];
    char fields[RLK_REDLOCK_MAX][RLK_OWNER_MAX];
    size_t field_len[RLK_REDLOCK_MAX];
    atomic_int lost_n; /* member grants judged lost by a watchdog */
    redlock_member_wd mh[RLK_REDLOCK_MAX];
};

typedef struct redlock_group {
    size_t n;
    int quorum;
    rlock *members[RLK_REDLOCK_MAX];
    rlk_buf tokkey[RLK_REDLOCK_MAX];  /* redisson_lock_token:{name} */
    rlk_buf channel[RLK_REDLOCK_MAX]; /* redisson_lock__channel:{name} */
} redlock_group;

static redlock_group *redlock_of(rlock *l)
{
    return l->impl;
}

static int64_t redlock_lease(const rlock *m, int64_t lease_ms)
{
    return lease_ms > 0 ? lease_ms : m->client->opts.watchdog_timeout_ms;
}

/* rlk_err(code, "RedLock: <what>: <the current last error>"). */
static int redlock_wrap(int code, const char *what)
{
    /* Copied first: the last error is the very buffer rlk_err() writes. */
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", rlock_last_error());
    return rlk_err(code, "RedLock: %s: %s", what, detail);
}

/* A random pause before the next attempt, in [1, 2 x the largest per-server timeout] ms, so that
 * contenders that split the votes do not collide again. */
static int64_t redlock_pause(rlock *const *members, size_t n)
{
    int64_t t = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t s = rlk_round_server_timeout(members[i]);
        t = s > t ? s : t;
    }
    return 1 + (int64_t)(rlk_group_rand() % (uint64_t)(2 * t));
}

/* ---- scripts per phase --------------------------------------------------------------------- */

/* Releases the hold of h on the servers in mask (lock_release.lua). Returns how many of them
 * confirmed that the owner held it (reply 0 or 1); *first_err gets the first error. */
static int redlock_release(rlk_round *r, redlock_hold *h, const unsigned char *mask,
                           int64_t lease_ms, int patient, int *first_err)
{
    redlock_group *g = redlock_of(h->base.lock);
    rlk_round_prepare(r, RLK_SCRIPT_LOCK_RELEASE);
    if (patient) {
        rlk_round_patient(r);
    }
    for (size_t i = 0; i < g->n; i++) {
        rlk_round_io *io = &r->io[i];
        io->active = mask[i];
        rlk_args_add(&io->keys, g->members[i]->name, g->members[i]->name_len);
        rlk_args_add(&io->keys, g->channel[i].p, g->channel[i].len);
        rlk_args_addi(&io->args, redlock_lease(g->members[i], lease_ms));
        rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
        rlk_args_adds(&io->args, "0");
    }
    rlk_round_run(r);
    int confirmed = 0;
    for (size_t i = 0; i < g->n; i++) {
        rlk_round_io *io = &r->io[i];
        if (!io->active) {
            continue;
        }
        if (io->reply != NULL && io->reply->type == REDIS_REPLY_INTEGER) {
            confirmed += io->reply->integer >= 0;
        } else if (*first_err == RLOCK_OK) {
            *first_err = io->err != RLOCK_OK ? io->err : RLOCK_EPROTO;
        }
    }
    return confirmed;
}

/* The servers to release on after a failed attempt or at unlock: every member, except one the
 * calling thread did not take here but holds through the member handle itself (a release would
 * take away that other hold). */
static void redlock_release_mask(redlock_group *g, const redlock_hold *h, unsigned char *mask)
{
    for (size_t i = 0; i < g->n; i++) {
        mask[i] = h->granted[i] || rlk_hold_get(g->members[i], h->base.tid, 0) == NULL;
    }
}

int rlk_redlock_check_acquire_reply(const redisReply *rep, uint64_t *token)
{
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        return -1;
    }
    if (rep->element[0]->integer != 1) {
        return 0;
    }
    *token = (uint64_t)rep->element[1]->integer;
    return 1;
}

int rlk_redlock_check_raise_reply(const redisReply *rep, uint64_t token)
{
    return rep != NULL && rep->type == REDIS_REPLY_INTEGER && (uint64_t)rep->integer >= token;
}

int rlk_redlock_check_query_reply(const redisReply *rep)
{
    if (rep == NULL || rep->type != REDIS_REPLY_INTEGER) {
        return -1;
    }
    return rep->integer == 1;
}

/* Phase 1: the acquire script everywhere. Returns the number of grants; fills h->granted,
 * *token (largest), *busy (servers that answered "held by another") and *first_err. */
static int redlock_grab(rlk_round *r, redlock_hold *h, int64_t lease_ms, uint64_t *token, int *busy,
                        int *first_err)
{
    redlock_group *g = redlock_of(h->base.lock);
    rlk_round_prepare(r, RLK_SCRIPT_LOCK_ACQUIRE);
    h->busy_at = -1;
    for (size_t i = 0; i < g->n; i++) {
        rlk_round_io *io = &r->io[i];
        io->active = 1;
        rlk_args_add(&io->keys, g->members[i]->name, g->members[i]->name_len);
        rlk_args_add(&io->keys, g->tokkey[i].p, g->tokkey[i].len);
        rlk_args_addi(&io->args, redlock_lease(g->members[i], lease_ms));
        rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
    }
    rlk_round_run(r);
    int grants = 0;
    for (size_t i = 0; i < g->n; i++) {
        uint64_t t = 0;
        int got = rlk_redlock_check_acquire_reply(r->io[i].reply, &t);
        h->granted[i] = 0;
        if (got == 1) {
            h->granted[i] = 1;
            grants++;
            *token = t > *token ? t : *token;
        } else if (got == 0) {
            if ((*busy)++ == 0) {
                h->busy_at = (int)i;
            }
        } else if (*first_err == RLOCK_OK) {
            *first_err = r->io[i].err != RLOCK_OK
                             ? r->io[i].err
                             : rlk_err(RLOCK_EPROTO, "RedLock: unexpected acquire reply");
        }
    }
    return grants;
}

/* Phase 2: writes token back to the granting servers. Returns how many confirmed. */
static int redlock_raise(rlk_round *r, redlock_hold *h, uint64_t token)
{
    redlock_group *g = redlock_of(h->base.lock);
    rlk_round_prepare(r, RLK_SCRIPT_REDLOCK_RAISE_TOKEN);
    for (size_t i = 0; i < g->n; i++) {
        rlk_round_io *io = &r->io[i];
        io->active = h->granted[i];
        rlk_args_add(&io->keys, g->tokkey[i].p, g->tokkey[i].len);
        rlk_args_addi(&io->args, (int64_t)token);
    }
    rlk_round_run(r);
    int confirmed = 0;
    for (size_t i = 0; i < g->n; i++) {
        confirmed += r->io[i].active && rlk_redlock_check_raise_reply(r->io[i].reply, token);
    }
    return confirmed;
}

/* ---- holds ---------------------------------------------------------------------------------- */

static redlock_hold *redlock_hold_of(rlk_hold *b)
{
    return b != NULL ? RLK_CONTAINER_OF(b, redlock_hold, base) : NULL;
}

/* The calling thread's hold record if it holds the group (count > 0), else NULL. */
static redlock_hold *redlock_held(rlock *l)
{
    rlk_hold *b = rlk_hold_get(l, rlk_thread_id(), 0);
    return b != NULL && b->count > 0 ? redlock_hold_of(b) : NULL;
}

static int redlock_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    redlock_member_wd *mh = RLK_CONTAINER_OF(e, redlock_member_wd, wd);
    const rlock *m = redlock_of(mh->hold->base.lock)->members[mh->idx];
    int rc = rlk_buf_append(key, m->name, m->name_len);
    return rc ? rc : rlk_buf_append(field, mh->hold->fields[mh->idx], mh->hold->field_len[mh->idx]);
}

/* A member's grant could not be renewed. The group is lost once fewer than a majority of its
 * grants are alive; on_lost fires once, through the first member's client. */
static void redlock_member_lost(rlk_wd_entry *e)
{
    redlock_member_wd *mh = RLK_CONTAINER_OF(e, redlock_member_wd, wd);
    redlock_hold *h = mh->hold;
    redlock_group *g = redlock_of(h->base.lock);
    int lost = atomic_fetch_add(&h->lost_n, 1) + 1;
    rlock *m = g->members[mh->idx];
    rlk_log(m->client, RLOCK_LOG_WARN, "RedLock: hold on server %zu (%s) lost, %d of %d left",
            mh->idx, m->name, h->granted_n - lost, h->granted_n);
    if (h->granted_n - lost < g->quorum && !atomic_exchange(&h->base.lost, 1)) {
        rlk_hold_obs_end(h->base.lock, &h->base, RLK_HOLD_LOST);
        rlk_notify_lost(g->members[0]);
        rlk_hold_cb_fire(h->base.lock, h->base.tid);
    }
}

static const rlk_renew_class redlock_renew_class = {
    .script = RLK_SCRIPT_RENEW_HASH,
    .describe = redlock_describe,
    .lost = redlock_member_lost,
};

static void redlock_watch(redlock_hold *h, int64_t lease_ms)
{
    redlock_group *g = redlock_of(h->base.lock);
    for (size_t i = 0; i < g->n; i++) {
        if (!h->granted[i]) {
            continue;
        }
        redlock_member_wd *mh = &h->mh[i];
        mh->hold = h;
        mh->idx = i;
        rlk_wd_entry_init(&mh->wd, &redlock_renew_class);
        rlock_client *c = g->members[i]->client;
        mh->registered =
            rlk_wd_add(c->watchdog, &mh->wd, redlock_lease(g->members[i], lease_ms)) == RLOCK_OK;
        if (!mh->registered) {
            redlock_member_lost(&mh->wd); /* its client is closed: nobody renews this grant */
        }
    }
}

static void redlock_unwatch(redlock_hold *h)
{
    redlock_group *g = redlock_of(h->base.lock);
    for (size_t i = 0; i < g->n; i++) {
        if (h->mh[i].registered) {
            rlk_wd_cancel(g->members[i]->client->watchdog, &h->mh[i].wd);
            h->mh[i].registered = 0;
        }
    }
}

/* ---- acquire ------------------------------------------------------------------------------- */

/* One attempt. Returns 1 acquired (h filled), 0 not acquired (everything released), or a
 * negative error when no majority could even be asked (fewer than a quorum answered). */
static int redlock_attempt(rlock *l, redlock_hold *h, int64_t lease_ms)
{
    redlock_group *g = redlock_of(l);
    rlk_round r;
    rlk_round_init(&r, g->members, g->n);
    int64_t min_lease = INT64_MAX;
    for (size_t i = 0; i < g->n; i++) {
        int64_t le = redlock_lease(g->members[i], lease_ms);
        min_lease = le < min_lease ? le : min_lease;
    }
    int64_t start = rlk_now_ms();
    uint64_t token = 0;
    int busy = 0, first_err = RLOCK_OK, ok = 0;
    int grants = redlock_grab(&r, h, lease_ms, &token, &busy, &first_err);
    h->granted_n = grants;
    if (grants >= g->quorum) {
        int confirmed = token > 0 ? redlock_raise(&r, h, token) : grants;
        int64_t validity = min_lease - (rlk_now_ms() - start) - (min_lease / 100 + 2);
        ok = confirmed >= g->quorum && validity > 0;
        h->base.token = token;
        h->valid_until = lease_ms > 0 ? start + min_lease - (min_lease / 100 + 2) : INT64_MAX;
    }
    if (!ok) {
        unsigned char mask[RLK_REDLOCK_MAX] = {0};
        int ignored = RLOCK_OK;
        redlock_release_mask(g, h, mask);
        (void)redlock_release(&r, h, mask, lease_ms, 0, &ignored);
        memset(h->granted, 0, sizeof(h->granted));
        h->granted_n = 0;
    }
    rlk_round_end(&r);
    if (ok) {
        return 1;
    }
    if (grants + busy < g->quorum && first_err != RLOCK_OK) {
        return first_err; /* not even a majority answered */
    }
    return 0;
}

/* The owner field sent to each server: "<uuid of the member's client>:<thread id>". */
static void redlock_fields(redlock_hold *h)
{
    redlock_group *g = redlock_of(h->base.lock);
    for (size_t i = 0; i < g->n; i++) {
        h->field_len[i] = rlk_owner(g->members[i]->client, h->base.tid, h->fields[i]);
    }
}

typedef struct redlock_wait {
    rlk_pubsub *ps;
    rlk_sub *sub;
} redlock_wait;

/* Between attempts: a random pause (redlock_pause()). Once a server said "held by another", the
 * waiter also listens on that server's unlock channel (the holder's release publishes on every
 * server), so the pause ends early when the lock is released: hand-offs take a round trip, not
 * the rest of a pause, while the pause still bounds every wait. */
static void redlock_pause_or_wait(redlock_group *g, redlock_hold *h, redlock_wait *w,
                                  int64_t deadline)
{
    int64_t pause = redlock_pause(g->members, g->n);
    if (w->sub == NULL && h->busy_at >= 0) {
        rlk_pubsub *ps = g->members[h->busy_at]->client->pubsub;
        const rlk_buf *ch = &g->channel[h->busy_at];
        if (rlk_sub_join(ps, ch->p, ch->len, &w->sub) == RLOCK_OK) {
            w->ps = ps;
        } else {
            w->sub = NULL;
        }
    }
    int64_t left = deadline - rlk_now_ms();
    pause = pause < left ? pause : left;
    if (w->sub != NULL) {
        int64_t end = rlk_now_ms() + pause;
        int rc = rlk_sub_wait_cancel(w->ps, w->sub, pause, NULL, rlk_call_cancel());
        if (rc == 1) {
            /* Every process' waiters wake at once: a few ms of jitter spares split votes. */
            rlk_group_sleep_ms((int64_t)(rlk_group_rand() % 4));
        } else if ((rc < 0 || rc == RLK_WAIT_INTERRUPTED) && end > rlk_now_ms() &&
                   !rlk_cancel_is_fired(rlk_call_cancel())) {
            /* The channel's subscription failed (refused by an ACL, or not confirmed in time):
             * the rest of the pause still bounds the next round, as without a channel. An
             * interrupted client gets the same bound. */
            rlk_group_sleep_ms(end - rlk_now_ms());
        }
    } else {
        rlk_group_sleep_ms(pause);
    }
}

/* RLOCK_ECLOSED once any member's client was freed: its pool and watchdog are gone. */
static int redlock_check_clients(const redlock_group *g)
{
    for (size_t i = 0; i < g->n; i++) {
        int rc = rlk_client_enter(g->members[i]->client);
        if (rc != RLOCK_OK) {
            return rc;
        }
    }
    return RLOCK_OK;
}

static int redlock_reenter(redlock_hold *h)
{
    if (atomic_load(&h->base.lost) || rlk_now_ms() >= h->valid_until) {
        return rlk_err(RLOCK_ELOST, "RedLock: the calling thread's hold was lost (no majority "
                                    "renewed, or past its validity); unlock it first");
    }
    h->base.count++;
    return RLOCK_OK;
}

static int redlock_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    redlock_group *g = redlock_of(l);
    int rc = redlock_check_clients(g);
    if (rc != RLOCK_OK) {
        return rc;
    }
    redlock_hold *h = redlock_held(l);
    if (h != NULL) {
        return redlock_reenter(h);
    }
    h = redlock_hold_of(rlk_hold_get(l, rlk_thread_id(), 1));
    if (h == NULL) {
        return rlk_err(RLOCK_ENOMEM, "RedLock: out of memory");
    }
    redlock_fields(h);
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    redlock_wait w = {NULL, NULL};
    for (;;) {
        /* A token fired during the pause ends the wait here: nothing is held between rounds. */
        rc = rlk_cancel_check(rlk_call_cancel(), "RedLock", g->members[0]->name);
        if (rc != RLOCK_OK) {
            break;
        }
        rc = redlock_attempt(l, h, lease_ms);
        if (rc == 1 || wait_ms == 0 || rlk_now_ms() >= deadline) {
            break;
        }
        redlock_pause_or_wait(g, h, &w, deadline);
    }
    if (w.sub != NULL) {
        rlk_sub_leave(w.ps, w.sub);
    }
    if (rc != 1) {
        rlk_hold_drop_if_empty(l, &h->base);
        if (rc == RLOCK_ECANCELED) {
            return rc;
        }
        if (rc < 0) {
            return redlock_wrap(rc, "no majority of servers reachable");
        }
        return rlk_err(RLOCK_ETIMEDOUT, "RedLock: no valid majority (%d of %zu) in %lld ms",
                       g->quorum, g->n, (long long)wait_ms);
    }
    h->base.lease_ms = lease_ms;
    if (lease_ms < 0) {
        redlock_watch(h, lease_ms);
    }
    /* Counted last: until here the record has count 0, so rlock_token() answers 0. */
    h->base.count = 1;
    return RLOCK_OK;
}

/* ---- the other operations ------------------------------------------------------------------ */

/* Reports how a full unlock ended the hold: released by a majority, lost (no majority renewed,
 * past its validity, or too few servers still had it), or unknown (errors: the gauge only). */
static void redlock_obs_end(rlock *l, redlock_hold *h, int lost, int majority, int first_err)
{
    int how = RLK_HOLD_RELEASED;
    if (lost || (!majority && first_err == RLOCK_OK)) {
        how = RLK_HOLD_LOST;
    } else if (!majority) {
        how = RLK_HOLD_FORGOTTEN;
    }
    rlk_hold_obs_end(l, &h->base, how);
}

static int redlock_unlock(rlock *l)
{
    redlock_group *g = redlock_of(l);
    if (redlock_check_clients(g) != RLOCK_OK) {
        return RLOCK_ECLOSED;
    }
    redlock_hold *h = redlock_held(l);
    if (h == NULL) {
        return rlk_err(RLOCK_ENOTOWNER, "RedLock: the calling thread does not hold the group");
    }
    int lost = atomic_load(&h->base.lost);
    if (h->base.count > 1) {
        h->base.count--;
        return lost ? rlk_err(RLOCK_ELOST, "RedLock: the hold was lost") : RLOCK_OK;
    }
    redlock_unwatch(h);
    lost = atomic_load(&h->base.lost); /* a watchdog may have judged it until the cancel */
    unsigned char mask[RLK_REDLOCK_MAX] = {0};
    redlock_release_mask(g, h, mask);
    rlk_round r;
    rlk_round_init(&r, g->members, g->n);
    int first_err = RLOCK_OK;
    int confirmed = redlock_release(&r, h, mask, h->base.lease_ms, 1, &first_err);
    rlk_round_end(&r);
    int64_t valid_until = h->valid_until;
    h->base.count = 0;
    redlock_obs_end(l, h, lost || rlk_now_ms() >= valid_until, confirmed >= g->quorum, first_err);
    rlk_hold_drop_if_empty(l, &h->base);
    if (lost || rlk_now_ms() >= valid_until) {
        return rlk_err(RLOCK_ELOST, "RedLock: %s",
                       lost ? "no majority could be renewed" : "the hold outlived its validity");
    }
    if (confirmed >= g->quorum) {
        return RLOCK_OK;
    }
    if (first_err != RLOCK_OK) {
        return redlock_wrap(first_err, "fewer than a majority confirmed the release");
    }
    return rlk_err(RLOCK_ELOST, "RedLock: only %d of %zu servers still had the hold", confirmed,
                   g->n);
}

/* HEXISTS of the calling thread's field on the servers that granted it (h != NULL), or EXISTS of
 * the lock key on every server (h == NULL). 1 if a majority answered 1, 0 if not, or an error
 * when no majority answered at all. */
static int redlock_query(rlock *l, const redlock_hold *h)
{
    redlock_group *g = redlock_of(l);
    if (redlock_check_clients(g) != RLOCK_OK) {
        return RLOCK_ECLOSED;
    }
    rlk_round r;
    rlk_round_init(&r, g->members, g->n);
    rlk_round_prepare(&r, -1);
    rlk_round_patient(&r);
    for (size_t i = 0; i < g->n; i++) {
        rlk_round_io *io = &r.io[i];
        io->active = h == NULL || h->granted[i];
        rlk_args_adds(&io->args, h != NULL ? "HEXISTS" : "EXISTS");
        rlk_args_add(&io->args, g->members[i]->name, g->members[i]->name_len);
        if (h != NULL) {
            rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
        }
    }
    rlk_round_run(&r);
    int ones = 0, answered = 0, first_err = RLOCK_OK;
    for (size_t i = 0; i < g->n; i++) {
        int one = rlk_redlock_check_query_reply(r.io[i].reply);
        if (one >= 0) {
            answered++;
            ones += one;
        } else if (r.io[i].active && first_err == RLOCK_OK) {
            first_err = r.io[i].err != RLOCK_OK ? r.io[i].err : RLOCK_EPROTO;
        }
    }
    rlk_round_end(&r);
    if (ones < g->quorum && answered < g->quorum && first_err != RLOCK_OK) {
        return redlock_wrap(first_err, "no majority of servers answered");
    }
    return ones >= g->quorum;
}

static int redlock_is_held(rlock *l)
{
    redlock_hold *h = redlock_held(l);
    if (h == NULL || atomic_load(&h->base.lost) || rlk_now_ms() >= h->valid_until) {
        return 0;
    }
    return redlock_query(l, h);
}

static int redlock_is_locked(rlock *l)
{
    return redlock_query(l, NULL);
}

static void redlock_destroy(rlock *l)
{
    redlock_group *g = redlock_of(l);
    /* Holds of threads that never unlocked: their grants stop being renewed and expire with
     * their lease. In a child of fork() the inherited ones are the parent's, forgotten first:
     * their entries sat in watchdogs the child abandoned. */
    rlk_handle_refresh(l);
    for (rlk_hold *b = l->holds; b != NULL; b = b->next) {
        redlock_unwatch(redlock_hold_of(b));
    }
    rlk_hold_forget_all(l);
    for (size_t i = 0; g != NULL && i < g->n; i++) {
        rlk_hold_cb_group_gone(g->members[i], l); /* a loop group's loss forwarding */
    }
    for (size_t i = 0; g != NULL && i < RLK_REDLOCK_MAX; i++) {
        rlk_buf_free(&g->tokkey[i]);
        rlk_buf_free(&g->channel[i]);
    }
    free(g);
    l->impl = NULL;
}

/* Extends the owner's grant on each server that granted it; a majority must still have it, or
 * the hold is lost: the grants left are released and RLOCK_ELOST returned, as an unlock would. */
static int redlock_extend(rlock *l, int64_t lease_ms)
{
    redlock_group *g = redlock_of(l);
    int rc = redlock_check_clients(g);
    redlock_hold *h = rc == RLOCK_OK ? redlock_held(l) : NULL;
    if (rc != RLOCK_OK || h == NULL) {
        return rc ? rc : rlk_err(RLOCK_ENOTOWNER, "RedLock: this owner does not hold the group");
    }
    int64_t start = rlk_now_ms();
    int ok = 0, first_err = RLOCK_OK;
    for (size_t i = 0; i < g->n && !atomic_load(&h->base.lost); i++) {
        if (!h->granted[i]) {
            continue;
        }
        rlk_acq a;
        rlk_acq_init(&a, g->members[i]); /* the same field: this client's uuid, the owner */
        rlk_sync_clear();
        int one = g->members[i]->single->extend(&a, lease_ms);
        ok += one == 1;
        first_err = one < 0 && first_err == RLOCK_OK ? one : first_err;
    }
    if (ok >= g->quorum) {
        int64_t valid = start + lease_ms - (lease_ms / 100 + 2);
        h->valid_until =
            h->valid_until == INT64_MAX || valid < h->valid_until ? h->valid_until : valid;
        return RLOCK_OK;
    }
    if (first_err != RLOCK_OK && !atomic_load(&h->base.lost)) {
        return redlock_wrap(first_err, "fewer than a majority extended the hold");
    }
    atomic_store(&h->base.lost, 1);
    h->base.count = 1;
    (void)redlock_unlock(l);
    return rlk_err(RLOCK_ELOST, "RedLock: only %d of %zu servers still had the hold", ok, g->n);
}

static rlock *redlock_first(rlock *l)
{
    return redlock_of(l)->members[0];
}

static const rlk_lock_ops redlock_ops = {
    RLK_GROUP_LOCK_OPS(redlock_acquire, redlock_unlock, redlock_is_locked, redlock_is_held,
                       rlk_single_token, redlock_destroy),
    .hold_size = sizeof(redlock_hold),
    .extend = redlock_extend,
    .obs_kind = RLOCK_MK_REDLOCK,
    .first_member = redlock_first,
};

rlock *const *rlk_redlock_members(rlock *l, size_t *n)
{
    if (l->ops != &redlock_ops) {
        *n = 0;
        return NULL;
    }
    *n = redlock_of(l)->n;
    return redlock_of(l)->members;
}

RLOCK_EXPORT rlock *rlock_redlock_new(rlock *const *locks, size_t n)
{
    if (rlk_group_check_members(locks, n, 1) != RLOCK_OK) {
        return NULL;
    }
    redlock_group *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        goto nomem;
    }
    for (size_t i = 0; i < RLK_REDLOCK_MAX; i++) {
        rlk_buf_init(&g->tokkey[i]);
        rlk_buf_init(&g->channel[i]);
    }
    rlock *l = rlk_handle_alloc(&redlock_ops);
    if (l == NULL) {
        free(g);
        goto nomem;
    }
    /* From here on rlock_free() (redlock_destroy) cleans up everything. */
    l->impl = g;
    g->n = n;
    g->quorum = (int)(n / 2 + 1);
    for (size_t i = 0; i < n; i++) {
        const rlock *m = locks[i];
        g->members[i] = locks[i];
        int rc = rlk_prefix_name(&g->tokkey[i], "redisson_lock_token", m->name, m->name_len);
        rc = rc ? rc
                : rlk_prefix_name(&g->channel[i], "redisson_lock__channel", m->name, m->name_len);
        if (rc != RLOCK_OK) {
            rlock_free(l);
            goto nomem;
        }
    }
    return l;
nomem:
    rlk_err(RLOCK_ENOMEM, "rlock_redlock_new: out of memory");
    return NULL;
}
