/*
 * RedLock: the Redlock algorithm of redis.io over n reentrant locks on n independent servers.
 *
 * One attempt: (1) the reentrant acquire script goes to every server before any reply is read
 * (a parallel round, lock_group.h), so it takes one per-server timeout at worst however many
 * servers hang; (2) with n/2+1 grants, the largest per-server fencing token is written back to
 * the granting servers (lua/redlock_raise_token.lua); (3) success iff n/2+1 servers granted and
 * confirmed and lease - elapsed - (lease/100 + 2 ms) > 0 on the monotonic clock, counted from
 * before the first send. Otherwise the release goes to every server at once, including those
 * that did not answer (on the same connection, right behind their acquire, so a server that
 * wakes up runs both in order), and the attempt is retried after a random pause.
 *
 * Holds are recorded per (group, thread) in this file, not in the members' hold records: a hold
 * remembers which servers granted, the owner field sent to each, the token and the end of its
 * validity. A re-entry by the holding thread only counts locally (no round trip) and does not
 * extend the validity; the last unlock releases on every server. With lease_ms < 0 each grant
 * is registered with the watchdog of its member's client; a lost member is counted and when
 * fewer than a majority of the grants are still alive the group is lost: on_lost of the first
 * member's client fires once with the first member's name, and unlock returns RLOCK_ELOST.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_group.h"
#include "pubsub.h"
#include "scripts.h"

typedef struct rlk_rl_hold rlk_rl_hold;

/* A watchdog entry for one member's grant; wd must stay the first member (container cast). */
typedef struct rlk_rl_mh {
    rlk_wd_entry wd;
    rlk_rl_hold *hold;
    size_t idx;
    int registered;
} rlk_rl_mh;

struct rlk_rl_hold {
    rlk_rl_hold *next;
    rlock *group;
    uint64_t tid;
    int count; /* group holds of the thread; 0 while acquiring */
    uint64_t token;
    int64_t valid_until; /* monotonic ms; INT64_MAX under the watchdog */
    int64_t lease_ms;    /* as asked: > 0 fixed, < 0 watchdog */
    int busy_at;         /* last attempt: first server held by another (-1: none) */
    int granted_n;
    unsigned char granted[RLK_REDLOCK_MAX];
    char fields[RLK_REDLOCK_MAX][RLK_OWNER_MAX];
    size_t field_len[RLK_REDLOCK_MAX];
    atomic_int lost_n; /* member grants judged lost by a watchdog */
    atomic_int lost;   /* the group lost its majority */
    rlk_rl_mh mh[RLK_REDLOCK_MAX];
};

typedef struct rlk_redlock {
    size_t n;
    int quorum;
    rlock *members[RLK_REDLOCK_MAX];
    rlk_buf tokkey[RLK_REDLOCK_MAX];  /* redisson_lock_token:{name} */
    rlk_buf channel[RLK_REDLOCK_MAX]; /* redisson_lock__channel:{name} */
    rlk_rl_hold *holds;               /* under the handle mutex */
} rlk_redlock;

static rlk_redlock *rlk_rl_of(rlock *l)
{
    return l->impl;
}

static int64_t rlk_rl_lease(const rlock *m, int64_t lease_ms)
{
    return lease_ms > 0 ? lease_ms : m->client->opts.watchdog_timeout_ms;
}

/* ---- scripts per phase --------------------------------------------------------------------- */

static void rlk_rl_add_name(rlk_args *a, const rlock *m)
{
    rlk_args_add(a, m->name, m->name_len);
}

/* Releases the hold of h on the servers in mask (lock_release.lua). Returns how many of them
 * confirmed that the owner held it (reply 0 or 1); *first_err gets the first error. */
static int rlk_rl_release(rlk_rl_round *r, rlk_rl_hold *h, const unsigned char *mask,
                          int64_t lease_ms, int patient, int *first_err)
{
    rlk_redlock *g = rlk_rl_of(h->group);
    rlk_rl_prepare(r, RLK_SCRIPT_LOCK_RELEASE);
    if (patient) {
        rlk_rl_patient(r);
    }
    for (size_t i = 0; i < g->n; i++) {
        rlk_rl_io *io = &r->io[i];
        io->active = mask[i];
        rlk_rl_add_name(&io->keys, g->members[i]);
        rlk_args_add(&io->keys, g->channel[i].p, g->channel[i].len);
        rlk_args_addi(&io->args, rlk_rl_lease(g->members[i], lease_ms));
        rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
        rlk_args_adds(&io->args, "0");
    }
    rlk_rl_run(r);
    int confirmed = 0;
    for (size_t i = 0; i < g->n; i++) {
        rlk_rl_io *io = &r->io[i];
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
static void rlk_rl_release_mask(rlk_redlock *g, const rlk_rl_hold *h, unsigned char *mask)
{
    for (size_t i = 0; i < g->n; i++) {
        mask[i] = h->granted[i] || rlk_hold_get(g->members[i], h->tid, 0) == NULL;
    }
}

/* Phase 1: the acquire script everywhere. Returns the number of grants; fills h->granted,
 * *token (largest), *busy (servers that answered "held by another") and *first_err. */
static int rlk_rl_grab(rlk_rl_round *r, rlk_rl_hold *h, int64_t lease_ms, uint64_t *token,
                       int *busy, int *first_err)
{
    rlk_redlock *g = rlk_rl_of(h->group);
    rlk_rl_prepare(r, RLK_SCRIPT_LOCK_ACQUIRE);
    h->busy_at = -1;
    for (size_t i = 0; i < g->n; i++) {
        rlk_rl_io *io = &r->io[i];
        io->active = 1;
        rlk_rl_add_name(&io->keys, g->members[i]);
        rlk_args_add(&io->keys, g->tokkey[i].p, g->tokkey[i].len);
        rlk_args_addi(&io->args, rlk_rl_lease(g->members[i], lease_ms));
        rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
    }
    rlk_rl_run(r);
    int grants = 0;
    for (size_t i = 0; i < g->n; i++) {
        redisReply *rep = r->io[i].reply;
        h->granted[i] = 0;
        if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
            rep->element[0]->type == REDIS_REPLY_INTEGER &&
            rep->element[1]->type == REDIS_REPLY_INTEGER) {
            if (rep->element[0]->integer == 1) {
                h->granted[i] = 1;
                grants++;
                uint64_t t = (uint64_t)rep->element[1]->integer;
                *token = t > *token ? t : *token;
            } else if ((*busy)++ == 0) {
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
static int rlk_rl_raise(rlk_rl_round *r, rlk_rl_hold *h, uint64_t token)
{
    rlk_redlock *g = rlk_rl_of(h->group);
    rlk_rl_prepare(r, RLK_SCRIPT_REDLOCK_RAISE_TOKEN);
    for (size_t i = 0; i < g->n; i++) {
        rlk_rl_io *io = &r->io[i];
        io->active = h->granted[i];
        rlk_args_add(&io->keys, g->tokkey[i].p, g->tokkey[i].len);
        rlk_args_addi(&io->args, (int64_t)token);
    }
    rlk_rl_run(r);
    int confirmed = 0;
    for (size_t i = 0; i < g->n; i++) {
        redisReply *rep = r->io[i].reply;
        confirmed += r->io[i].active && rep != NULL && rep->type == REDIS_REPLY_INTEGER &&
                     (uint64_t)rep->integer >= token;
    }
    return confirmed;
}

/* ---- holds ---------------------------------------------------------------------------------- */

/* The calling thread's hold; with unlink_last, a hold at its last count is also unlinked. */
static rlk_rl_hold *rlk_rl_find(rlock *l, uint64_t tid, int unlink_last)
{
    pthread_mutex_lock(&l->mu);
    rlk_rl_hold **pp = &rlk_rl_of(l)->holds;
    while (*pp != NULL && (*pp)->tid != tid) {
        pp = &(*pp)->next;
    }
    rlk_rl_hold *h = *pp;
    if (h != NULL && unlink_last && h->count <= 1) {
        *pp = h->next;
    }
    pthread_mutex_unlock(&l->mu);
    return h;
}

static int rlk_rl_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    rlk_rl_mh *mh = (rlk_rl_mh *)e;
    const rlock *m = rlk_rl_of(mh->hold->group)->members[mh->idx];
    int rc = rlk_buf_append(key, m->name, m->name_len);
    return rc ? rc : rlk_buf_append(field, mh->hold->fields[mh->idx], mh->hold->field_len[mh->idx]);
}

/* A member's grant could not be renewed. The group is lost once fewer than a majority of its
 * grants are alive; on_lost fires once, through the first member's client. */
static void rlk_rl_member_lost(rlk_wd_entry *e)
{
    rlk_rl_mh *mh = (rlk_rl_mh *)e;
    rlk_rl_hold *h = mh->hold;
    rlk_redlock *g = rlk_rl_of(h->group);
    int lost = atomic_fetch_add(&h->lost_n, 1) + 1;
    rlock *m = g->members[mh->idx];
    rlk_log(m->client, RLOCK_LOG_WARN, "RedLock: hold on server %zu (%s) lost, %d of %d left",
            mh->idx, m->name, h->granted_n - lost, h->granted_n);
    if (h->granted_n - lost < g->quorum && !atomic_exchange(&h->lost, 1)) {
        rlock *first = g->members[0];
        if (first->client->opts.on_lost != NULL) {
            first->client->opts.on_lost(first->name, first->client->opts.user_data);
        }
    }
}

static const rlk_renew_class rlk_rl_renew_class = {
    .script = RLK_SCRIPT_RENEW_HASH,
    .describe = rlk_rl_describe,
    .lost = rlk_rl_member_lost,
};

static void rlk_rl_watch(rlk_rl_hold *h, int64_t lease_ms)
{
    rlk_redlock *g = rlk_rl_of(h->group);
    for (size_t i = 0; i < g->n; i++) {
        if (!h->granted[i]) {
            continue;
        }
        rlk_rl_mh *mh = &h->mh[i];
        mh->hold = h;
        mh->idx = i;
        rlk_wd_entry_init(&mh->wd, &rlk_rl_renew_class);
        rlock_client *c = g->members[i]->client;
        mh->registered =
            rlk_wd_add(c->watchdog, &mh->wd, rlk_rl_lease(g->members[i], lease_ms)) == RLOCK_OK;
        if (!mh->registered) {
            rlk_rl_member_lost(&mh->wd); /* its client is closed: nobody renews this grant */
        }
    }
}

static void rlk_rl_unwatch(rlk_rl_hold *h)
{
    rlk_redlock *g = rlk_rl_of(h->group);
    for (size_t i = 0; i < g->n; i++) {
        /* A freed client's watchdog is gone and has forgotten its entries already. */
        if (h->mh[i].registered && !atomic_load(&g->members[i]->client->closed)) {
            rlk_wd_cancel(g->members[i]->client->watchdog, &h->mh[i].wd);
            h->mh[i].registered = 0;
        }
    }
}

/* ---- acquire ------------------------------------------------------------------------------- */

/* One attempt. Returns 1 acquired (h filled), 0 not acquired (everything released), or a
 * negative error when no majority could even be asked (fewer than a quorum answered). */
static int rlk_rl_attempt(rlock *l, rlk_rl_hold *h, int64_t lease_ms)
{
    rlk_redlock *g = rlk_rl_of(l);
    rlk_rl_round r;
    rlk_rl_round_init(&r, g->members, g->n);
    int64_t min_lease = INT64_MAX;
    for (size_t i = 0; i < g->n; i++) {
        int64_t le = rlk_rl_lease(g->members[i], lease_ms);
        min_lease = le < min_lease ? le : min_lease;
    }
    int64_t start = rlk_now_ms();
    uint64_t token = 0;
    int busy = 0, first_err = RLOCK_OK, ok = 0;
    int grants = rlk_rl_grab(&r, h, lease_ms, &token, &busy, &first_err);
    h->granted_n = grants;
    if (grants >= g->quorum) {
        int confirmed = token > 0 ? rlk_rl_raise(&r, h, token) : grants;
        int64_t validity = min_lease - (rlk_now_ms() - start) - (min_lease / 100 + 2);
        ok = confirmed >= g->quorum && validity > 0;
        h->token = token;
        h->valid_until = lease_ms > 0 ? start + min_lease - (min_lease / 100 + 2) : INT64_MAX;
    }
    if (!ok) {
        unsigned char mask[RLK_REDLOCK_MAX];
        int ignored = RLOCK_OK;
        rlk_rl_release_mask(g, h, mask);
        (void)rlk_rl_release(&r, h, mask, lease_ms, 0, &ignored);
        memset(h->granted, 0, sizeof(h->granted));
        h->granted_n = 0;
    }
    rlk_rl_round_end(&r);
    if (ok) {
        return 1;
    }
    if (grants + busy < g->quorum && first_err != RLOCK_OK) {
        return first_err; /* not even a majority answered */
    }
    return 0;
}

static rlk_rl_hold *rlk_rl_new_hold(rlock *l, uint64_t tid)
{
    rlk_redlock *g = rlk_rl_of(l);
    rlk_rl_hold *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return NULL;
    }
    h->group = l;
    h->tid = tid;
    for (size_t i = 0; i < g->n; i++) {
        h->field_len[i] = rlk_owner(g->members[i]->client, tid, h->fields[i]);
    }
    return h;
}

typedef struct rlk_rl_wait {
    rlk_pubsub *ps;
    rlk_sub *sub;
} rlk_rl_wait;

/* Between attempts: a random pause (rlk_rl_pause()). Once a server said "held by another", the
 * waiter also listens on that server's unlock channel (the holder's release publishes on every
 * server), so the pause ends early when the lock is released: hand-offs take a round trip, not
 * the rest of a pause, while the pause still bounds every wait. */
static void rlk_rl_pause_or_wait(rlk_redlock *g, rlk_rl_hold *h, rlk_rl_wait *w, int64_t deadline)
{
    int64_t pause = rlk_rl_pause(g->members, g->n);
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
        int woken = rlk_sub_wait(w->ps, w->sub, pause, NULL);
        if (woken == 1) {
            /* Every process' waiters wake at once: a few ms of jitter spares split votes. */
            rlk_group_sleep_ms((int64_t)(rlk_group_rand() % 4));
        } else if (woken == 2) {
            rlk_group_sleep_ms(pause); /* An interrupted client: the pause still bounds it. */
        }
    } else {
        rlk_group_sleep_ms(pause);
    }
}

/* RLOCK_ECLOSED once any member's client was freed: its pool and watchdog are gone. */
static int rlk_rl_check_clients(const rlk_redlock *g)
{
    for (size_t i = 0; i < g->n; i++) {
        int rc = rlk_client_check(g->members[i]->client);
        if (rc != RLOCK_OK) {
            return rc;
        }
    }
    return RLOCK_OK;
}

static int rlk_rl_reenter(rlk_rl_hold *h)
{
    if (atomic_load(&h->lost) || rlk_now_ms() >= h->valid_until) {
        return rlk_err(RLOCK_ELOST, "RedLock: the calling thread's hold was lost (no majority "
                                    "renewed, or past its validity); unlock it first");
    }
    h->count++;
    return RLOCK_OK;
}

static int rlk_rl_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    rlk_redlock *g = rlk_rl_of(l);
    uint64_t tid = rlk_thread_id();
    int rc = rlk_rl_check_clients(g);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rlk_rl_hold *h = rlk_rl_find(l, tid, 0);
    if (h != NULL) {
        return rlk_rl_reenter(h);
    }
    h = rlk_rl_new_hold(l, tid);
    if (h == NULL) {
        return rlk_err(RLOCK_ENOMEM, "RedLock: out of memory");
    }
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    rlk_rl_wait w = {NULL, NULL};
    for (;;) {
        rc = rlk_rl_attempt(l, h, lease_ms);
        if (rc == 1 || wait_ms == 0 || rlk_now_ms() >= deadline) {
            break;
        }
        rlk_rl_pause_or_wait(g, h, &w, deadline);
    }
    if (w.sub != NULL) {
        rlk_sub_leave(w.ps, w.sub);
    }
    if (rc != 1) {
        free(h);
        if (rc < 0) {
            return rlk_rl_wrap(rc, "no majority of servers reachable");
        }
        return rlk_err(RLOCK_ETIMEDOUT, "RedLock: no valid majority (%d of %zu) in %lld ms",
                       g->quorum, g->n, (long long)wait_ms);
    }
    h->count = 1;
    h->lease_ms = lease_ms;
    if (lease_ms < 0) {
        rlk_rl_watch(h, lease_ms);
    }
    pthread_mutex_lock(&l->mu);
    h->next = g->holds;
    g->holds = h;
    pthread_mutex_unlock(&l->mu);
    return RLOCK_OK;
}

/* ---- the other operations ------------------------------------------------------------------ */

static int rlk_rl_unlock(rlock *l)
{
    rlk_redlock *g = rlk_rl_of(l);
    if (rlk_rl_check_clients(g) != RLOCK_OK) {
        return RLOCK_ECLOSED;
    }
    rlk_rl_hold *h = rlk_rl_find(l, rlk_thread_id(), 1);
    if (h == NULL) {
        return rlk_err(RLOCK_ENOTOWNER, "RedLock: the calling thread does not hold the group");
    }
    if (h->count > 1) {
        h->count--;
        return atomic_load(&h->lost) ? rlk_err(RLOCK_ELOST, "RedLock: the hold was lost")
                                     : RLOCK_OK;
    }
    rlk_rl_unwatch(h);
    int lost = atomic_load(&h->lost);
    unsigned char mask[RLK_REDLOCK_MAX];
    rlk_rl_release_mask(g, h, mask);
    rlk_rl_round r;
    rlk_rl_round_init(&r, g->members, g->n);
    int first_err = RLOCK_OK;
    int confirmed = rlk_rl_release(&r, h, mask, h->lease_ms, 1, &first_err);
    rlk_rl_round_end(&r);
    int64_t valid_until = h->valid_until;
    free(h);
    if (lost || rlk_now_ms() >= valid_until) {
        return rlk_err(RLOCK_ELOST, "RedLock: %s",
                       lost ? "no majority could be renewed" : "the hold outlived its validity");
    }
    if (confirmed >= g->quorum) {
        return RLOCK_OK;
    }
    if (first_err != RLOCK_OK) {
        return rlk_rl_wrap(first_err, "fewer than a majority confirmed the release");
    }
    return rlk_err(RLOCK_ELOST, "RedLock: only %d of %zu servers still had the hold", confirmed,
                   g->n);
}

/* HEXISTS of the calling thread's field on the servers that granted it (h != NULL), or EXISTS of
 * the lock key on every server (h == NULL). 1 if a majority answered 1, 0 if not, or an error
 * when no majority answered at all. */
static int rlk_rl_query(rlock *l, const rlk_rl_hold *h)
{
    rlk_redlock *g = rlk_rl_of(l);
    if (rlk_rl_check_clients(g) != RLOCK_OK) {
        return RLOCK_ECLOSED;
    }
    rlk_rl_round r;
    rlk_rl_round_init(&r, g->members, g->n);
    rlk_rl_prepare(&r, -1);
    rlk_rl_patient(&r);
    for (size_t i = 0; i < g->n; i++) {
        rlk_rl_io *io = &r.io[i];
        io->active = h == NULL || h->granted[i];
        rlk_args_adds(&io->args, h != NULL ? "HEXISTS" : "EXISTS");
        rlk_rl_add_name(&io->args, g->members[i]);
        if (h != NULL) {
            rlk_args_add(&io->args, h->fields[i], h->field_len[i]);
        }
    }
    rlk_rl_run(&r);
    int ones = 0, answered = 0, first_err = RLOCK_OK;
    for (size_t i = 0; i < g->n; i++) {
        redisReply *rep = r.io[i].reply;
        if (rep != NULL && rep->type == REDIS_REPLY_INTEGER) {
            answered++;
            ones += rep->integer == 1;
        } else if (r.io[i].active && first_err == RLOCK_OK) {
            first_err = r.io[i].err != RLOCK_OK ? r.io[i].err : RLOCK_EPROTO;
        }
    }
    rlk_rl_round_end(&r);
    if (ones < g->quorum && answered < g->quorum && first_err != RLOCK_OK) {
        return rlk_rl_wrap(first_err, "no majority of servers answered");
    }
    return ones >= g->quorum;
}

static int rlk_rl_is_held(rlock *l)
{
    rlk_rl_hold *h = rlk_rl_find(l, rlk_thread_id(), 0);
    if (h == NULL || atomic_load(&h->lost) || rlk_now_ms() >= h->valid_until) {
        return 0;
    }
    return rlk_rl_query(l, h);
}

static int rlk_rl_is_locked(rlock *l)
{
    return rlk_rl_query(l, NULL);
}

static uint64_t rlk_rl_token(rlock *l)
{
    rlk_rl_hold *h = rlk_rl_find(l, rlk_thread_id(), 0);
    return h != NULL ? h->token : 0;
}

static void rlk_rl_destroy(rlock *l)
{
    rlk_redlock *g = rlk_rl_of(l);
    while (g != NULL && g->holds != NULL) {
        rlk_rl_hold *h = g->holds;
        g->holds = h->next;
        rlk_rl_unwatch(h); /* the grants stop being renewed and expire with their lease */
        free(h);
    }
    for (size_t i = 0; g != NULL && i < RLK_REDLOCK_MAX; i++) {
        rlk_buf_free(&g->tokkey[i]);
        rlk_buf_free(&g->channel[i]);
    }
    free(g);
    l->impl = NULL;
}

static const rlk_lock_ops rlk_rl_ops = {
    .type_name = "RedLock",
    .acquire = rlk_rl_acquire,
    .unlock = rlk_rl_unlock,
    .force_unlock = rlk_group_unsupported,
    .is_locked = rlk_rl_is_locked,
    .is_held = rlk_rl_is_held,
    .hold_count = rlk_group_unsupported,
    .ttl = rlk_group_ttl,
    .token = rlk_rl_token,
    .destroy = rlk_rl_destroy,
};

RLOCK_EXPORT rlock *rlock_redlock_new(rlock *const *locks, size_t n)
{
    if (rlk_group_check_members(locks, n, 1) != RLOCK_OK) {
        return NULL;
    }
    rlk_redlock *g = calloc(1, sizeof(*g));
    rlock *l = g != NULL ? rlk_handle_alloc(&rlk_rl_ops) : NULL;
    int rc = l != NULL ? RLOCK_OK : RLOCK_ENOMEM;
    if (l != NULL) {
        l->impl = g;
        g->n = n;
        g->quorum = (int)(n / 2 + 1);
        for (size_t i = 0; i < RLK_REDLOCK_MAX; i++) {
            rlk_buf_init(&g->tokkey[i]);
            rlk_buf_init(&g->channel[i]);
        }
    }
    for (size_t i = 0; i < n && rc == RLOCK_OK; i++) {
        const rlock *m = locks[i];
        g->members[i] = locks[i];
        rc = rlk_prefix_name(&g->tokkey[i], "redisson_lock_token", m->name, m->name_len);
        rc = rc ? rc
                : rlk_prefix_name(&g->channel[i], "redisson_lock__channel", m->name, m->name_len);
    }
    if (rc != RLOCK_OK) {
        free(l != NULL ? NULL : g);
        rlock_free(l);
        rlk_err(RLOCK_ENOMEM, "rlock_redlock_new: out of memory");
        return NULL;
    }
    return l;
}
