/*
 * Multi-lock and RedLock groups on loop clients (loop_group.h). A group operation starts its
 * members' own loop operations, so their waits, tokens and client frees behave as theirs do, and
 * keeps the round's state: which members it took, what to give back, when to try again. Static
 * helpers are named lg_* (both groups), mu_* (multi-lock) and rl_* (RedLock).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock_group.h"
#include "lock_lost.h"
#include "lock_multi.h"
#include "lock_redlock.h"
#include "loop_group.h"
#include "loop_hold.h"
#include "loop_lock.h"
#include "loop_reentrant.h"
#include "owner.h"

/* The multi-lock's longest random pause between failed rounds, in ms (as lock_multi.c's). */
#define LG_MULTI_MAX_BACKOFF_MS 20
/* lg_op.end_rc after a give-back: start another round rather than report. */
#define LG_RETRY 1

typedef struct lg_op lg_op;

/* The user_data of one member's operation: its group operation and its index. */
typedef struct lg_member {
    lg_op *g;
    size_t i;
} lg_member;

struct lg_op {
    rlock *group;
    rlock *const *m; /* the group's members, borrowed */
    size_t n;
    int redlock, quorum;
    uint64_t tid;
    rlock_lock_args args; /* the caller's; wait_ms is the whole group's budget */
    int64_t deadline;
    rlock_loop loop; /* the members' loop: the pause timer's hooks */
    void *timer;
    /* During a pause: an operation on member 0's client that its token and its free wake. */
    rlk_loop_op watch;
    int watching;
    rlock_done_fn done;
    void *user_data;
    size_t pending; /* member operations on their way */
    size_t first;   /* multi-lock: the member to wait for (SIZE_MAX: none) */
    int failures;
    int64_t start; /* multi-lock: the sweep's first grant; RedLock: the attempt's start */
    int end_rc;    /* after the give-back: the code to report, or LG_RETRY */
    int grants;    /* RedLock: this attempt's grants, busy answers and first error */
    int busy;
    int err;
    int unlock_ok; /* unlock: members that released */
    int notowner;  /* unlock: members whose owner held nothing */
    unsigned char *taken;
    /* RedLock: each member's operation on its way in this attempt (NULL once it answered), and
     * the timer of the attempt's server timeout, after which the silent ones are abandoned. */
    rlk_loop_lock_op **ops;
    void *bound;
    lg_member *ctx;
    char msg[256];
};

/* ---- the group's own on_lost ------------------------------------------------------------- */

/* How many of a RedLock's members the owner (the calling context's) still holds on their
 * clients' records. */
static size_t lg_alive(rlock *const *m, size_t n, uint64_t tid)
{
    size_t alive = 0;
    for (size_t i = 0; i < n; i++) {
        rlk_loop_client *lc =
            rlk_client_check(m[i]->client) == RLOCK_OK ? rlk_loop_of(m[i]->client) : NULL;
        rlk_loop_hold *h = lc != NULL ? rlk_loop_hold_get(lc, m[i]->name, m[i]->name_len, tid,
                                                          rlk_loop_hold_side(m[i]), 0)
                                      : NULL;
        alive += h != NULL && !h->lost && h->count > 0;
    }
    return alive;
}

/* A member hold's loss (the loop watchdog calls it as the owner): the group is lost at the first
 * member's for a multi-lock, once fewer than a majority are held for a RedLock, as on a threaded
 * client; its on_lost runs once (the entry is taken out). */
static void lg_member_lost(rlock *member, void *group_arg)
{
    (void)member;
    rlock *group = group_arg;
    uint64_t tid = rlk_thread_id();
    size_t n = 0;
    rlock *const *rm = rlk_redlock_members(group, &n);
    if (rm != NULL && lg_alive(rm, n, tid) >= n / 2 + 1) {
        return;
    }
    void (*fn)(rlock *, void *) = NULL;
    void *ud = NULL;
    if (rlk_hold_cb_take_own(group, tid, &fn, &ud) && fn != NULL) {
        fn(group, ud);
    }
}

/* The group handle is being freed: member's hold records forward to it no more. */
static void lg_group_gone(rlock *member, const rlock *group)
{
    rlk_loop_client *lc = rlk_loop_of(member->client);
    for (rlk_loop_hold *h = lc != NULL ? lc->holds : NULL; h != NULL; h = h->next) {
        if (h->on_lost == lg_member_lost && h->lost_ud == group) {
            h->on_lost = NULL;
            h->lost_ud = NULL;
            h->lost_lock = NULL;
        }
    }
}

/* Notes rc's message (the current last error) for the report at the end. */
static int lg_note(lg_op *g, int rc)
{
    if (rc < 0 && g->err == RLOCK_OK) {
        g->err = rc;
        snprintf(g->msg, sizeof(g->msg), "%s", rlock_last_error());
    }
    return rc;
}

static void lg_unwatch(lg_op *g)
{
    if (g->watching) {
        rlk_loop_op_remove(&g->watch);
        g->watching = 0;
    }
}

static void lg_free(lg_op *g)
{
    lg_unwatch(g);
    if (g->timer != NULL) {
        g->loop.timer_free(g->timer);
    }
    if (g->bound != NULL) {
        g->loop.timer_free(g->bound);
    }
    free(g->taken);
    free(g->ops);
    free(g->ctx);
    free(g);
}

/* Frees g and runs its done with rc (the group's message set for an error). */
static void lg_finish(lg_op *g, int rc, const char *why)
{
    rlock *group = g->group;
    rlock_done_fn done = g->done;
    void *user_data = g->user_data;
    if (rc < 0) {
        rlk_err(rc, "%s: %s%s%s", g->redlock ? "RedLock" : "multi-lock", why, g->msg[0] ? ": " : "",
                g->msg);
    }
    lg_free(g);
    done(group, rc, user_data);
}

/* The group is held: its on_lost is registered for the owner on the group handle (the members'
 * holds forward to it), and each member's client told to forget that when the group is freed. */
static void lg_granted(lg_op *g)
{
    if (g->args.on_lost == NULL ||
        rlk_hold_cb_set(g->group, g->tid, g->args.on_lost, g->args.user_data, NULL) != RLOCK_OK) {
        return;
    }
    for (size_t i = 0; i < g->n; i++) {
        g->m[i]->client->loop_group_gone = lg_group_gone;
    }
}

static lg_op *lg_alloc(rlock *group, rlock *const *m, size_t n, rlock_done_fn done, void *ud)
{
    lg_op *g = calloc(1, sizeof(*g));
    if (g != NULL) {
        g->taken = calloc(n, 1);
        g->ops = calloc(n, sizeof(rlk_loop_lock_op *));
        g->ctx = calloc(n, sizeof(*g->ctx));
    }
    if (g == NULL || g->taken == NULL || g->ops == NULL || g->ctx == NULL) {
        if (g != NULL) {
            lg_free(g);
        }
        rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
        return NULL;
    }
    *g = (lg_op){.group = group,
                 .m = m,
                 .n = n,
                 .done = done,
                 .user_data = ud,
                 .taken = g->taken,
                 .ops = g->ops,
                 .ctx = g->ctx,
                 .first = SIZE_MAX};
    g->redlock = rlk_group_members(group, &(size_t){0}) == NULL;
    g->quorum = (int)(n / 2 + 1);
    for (size_t i = 0; i < n; i++) {
        g->ctx[i] = (lg_member){.g = g, .i = i};
    }
    return g;
}

/* ---- members ---------------------------------------------------------------------------- */

/* The members of a group handle and their loop; RLOCK_OK or a documented error: a member on a
 * threaded client or on another loop RLOCK_EINVAL, a freed member client RLOCK_ECLOSED (skipped
 * with closed_ok: an unlock still releases the other members). */
static int lg_members(rlock *group, rlock *const **m, size_t *n, rlock_loop *loop, int closed_ok)
{
    int have_loop = 0;
    *m = rlk_group_members(group, n);
    if (*m == NULL) {
        *m = rlk_redlock_members(group, n);
    }
    for (size_t i = 0; *m != NULL && i < *n; i++) {
        rlock *x = (*m)[i];
        int r = rlk_client_check(x->client);
        if (r != RLOCK_OK) {
            if (closed_ok) {
                continue;
            }
            return r;
        }
        rlk_loop_client *lc = rlk_loop_of(x->client);
        if (lc == NULL) {
            return rlk_err(RLOCK_EINVAL,
                           "rlock_lock_async: group member %zu is on a threaded "
                           "client; every member must be on a loop client",
                           i);
        }
        if (!have_loop) {
            *loop = lc->loop;
            have_loop = 1;
        } else if (lc->loop.loop_data != loop->loop_data || lc->loop.timer_new != loop->timer_new) {
            return rlk_err(RLOCK_EINVAL,
                           "rlock_lock_async: group member %zu is on another loop "
                           "than the first member",
                           i);
        }
    }
    return *m != NULL ? RLOCK_OK : rlk_err(RLOCK_EINVAL, "rlock_lock_async: not a group");
}

static void lg_member_done(rlock *lock, int rc, void *user_data);

/* Starts member i's acquire with wait_ms; its done (or at once an error) goes to
 * lg_member_done's logic. Returns RLOCK_OK when started. */
static int lg_take(lg_op *g, size_t i, int64_t wait_ms)
{
    rlock_lock_args a = g->args;
    a.wait_ms = wait_ms;
    /* The group's own on_lost is the group's, called through each member hold's forwarding. */
    a.on_lost = g->args.on_lost != NULL ? lg_member_lost : NULL;
    a.user_data = g->group;
    rlock *x = g->m[i];
    int r = rlk_client_check(x->client);
    rlk_loop_client *lc = r == RLOCK_OK ? rlk_loop_of(x->client) : NULL;
    if (r == RLOCK_OK && lc == NULL) {
        r = rlk_err(RLOCK_EINVAL, "group member %zu is not on a loop client", i);
    }
    if (r == RLOCK_OK && g->redlock) { /* RedLock members are reentrant locks */
        r = rlk_loop_reentrant_lock_op(lc, x, g->tid, &a, lg_member_done, &g->ctx[i], &g->ops[i]);
    } else if (r == RLOCK_OK) {
        r = rlk_loop_lock_start(lc, x, g->tid, &a, lg_member_done, &g->ctx[i]);
    }
    if (r == RLOCK_OK) {
        g->pending++;
    }
    return lg_note(g, r);
}

static void lg_after_back(lg_op *g);

static void lg_back_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    (void)rc; /* a failed give-back leaves a hold that ends with its lease, as threaded */
    lg_op *g = ((lg_member *)user_data)->g;
    if (--g->pending == 0) {
        lg_after_back(g);
    }
}

/* Gives back every member taken in this round, then lg_after_back() with end_rc. */
static void lg_give_back(lg_op *g, int end_rc)
{
    g->end_rc = end_rc;
    for (size_t i = 0; i < g->n; i++) {
        if (g->taken[i]) {
            g->taken[i] = 0;
            g->pending +=
                rlk_loop_unlock_start(g->m[i], g->tid, lg_back_done, &g->ctx[i]) == RLOCK_OK;
        }
    }
    if (g->pending == 0) {
        lg_after_back(g);
    }
}

/* The wait left for a member call: RLOCK_WAIT_FOREVER without a deadline. */
static int64_t lg_left(const lg_op *g)
{
    if (g->deadline == INT64_MAX) {
        return RLOCK_WAIT_FOREVER;
    }
    int64_t left = g->deadline - rlk_now_ms();
    return left > 0 ? left : 0;
}

/* ---- the multi-lock's rounds -------------------------------------------------------------- */

/* A member could not be asked or failed: give back what the round took, then report rc. */
static void mu_fail(lg_op *g, int rc)
{
    lg_note(g, rc);
    lg_give_back(g, rc);
}

/* Takes the next member not taken yet without waiting; all taken: checks the sweep's length. */
static void mu_next(lg_op *g)
{
    size_t i = 0;
    while (i < g->n && g->taken[i]) {
        i++;
    }
    if (i < g->n) {
        int r = lg_take(g, i, 0);
        if (r != RLOCK_OK) {
            mu_fail(g, r);
        }
        return;
    }
    int64_t lease = g->args.lease_ms;
    if (lease > 0 && rlk_now_ms() - g->start >= lease) {
        /* The first member's lease may have run out while the others were taken. */
        g->first = g->first != SIZE_MAX ? g->first : 0;
        lg_give_back(g, LG_RETRY);
        return;
    }
    lg_granted(g);
    lg_finish(g, RLOCK_OK, "");
}

/* A round: the member to wait for first (with what is left of the budget), then the others. */
static void mu_round(lg_op *g)
{
    g->start = 0;
    if (g->first == SIZE_MAX) {
        mu_next(g);
        return;
    }
    int r = lg_take(g, g->first, lg_left(g));
    if (r != RLOCK_OK) {
        mu_fail(g, r);
    }
}

/* Member i answered rc: go on, retry with the busy member waited for first, or give up. */
static void mu_member(lg_op *g, size_t i, int rc)
{
    if (rc == RLOCK_OK) {
        g->taken[i] = 1;
        g->start = g->start != 0 ? g->start : rlk_now_ms();
        mu_next(g);
    } else if (rc == RLOCK_ETIMEDOUT && i != g->first) {
        g->first = i;
        lg_give_back(g, LG_RETRY);
    } else {
        mu_fail(g, rc);
    }
}

/* ---- RedLock's attempts ------------------------------------------------------------------ */

static void rl_decide(lg_op *g);

/* One server's answer in an attempt. */
static void rl_count(lg_op *g, size_t i, int rc)
{
    if (rc == RLOCK_OK) {
        g->taken[i] = 1;
        g->grants++;
    } else if (rc == RLOCK_ETIMEDOUT) {
        g->busy++;
    } else if (rc == RLOCK_ECANCELED || rc == RLOCK_ECLOSED) {
        g->end_rc = rc; /* ends the acquire, whatever the majority */
    }
}

/* The attempt's bound on the servers' replies: the largest of the members' clients'
 * redlock_server_timeout_ms (each reply is bounded by its own client's in lock_redlock.c). */
static int64_t rl_server_timeout(const lg_op *g)
{
    int64_t t = 1;
    for (size_t i = 0; i < g->n; i++) {
        int64_t s = g->m[i]->client->opts.redlock_server_timeout_ms;
        t = s > t ? s : t;
    }
    return t;
}

/* An attempt: the acquire on every server at once, none waiting. */
static void rl_attempt(lg_op *g)
{
    g->start = rlk_now_ms();
    g->grants = g->busy = 0;
    g->end_rc = RLOCK_OK;
    g->err = RLOCK_OK;
    g->msg[0] = '\0';
    size_t failed[RLK_REDLOCK_MAX];
    int codes[RLK_REDLOCK_MAX];
    size_t nf = 0;
    for (size_t i = 0; i < g->n; i++) {
        int r = lg_take(g, i, 0);
        if (r != RLOCK_OK) {
            failed[nf] = i;
            codes[nf++] = r;
        }
    }
    /* Counted after every call started: a count may end the attempt. */
    for (size_t k = 0; k < nf; k++) {
        rl_count(g, failed[k], codes[k]);
    }
    if (g->pending == 0) {
        rl_decide(g);
    } else if (g->bound != NULL) {
        (void)g->loop.timer_start(g->bound, rl_server_timeout(g));
    }
}

/* The attempt's server timeout passed: the servers that did not answer count as failed, their
 * operations abandoned (a grant that comes later is given back), and the attempt is decided on
 * the others, as lock_redlock.c's round does after each server's redlock_server_timeout_ms. */
static void rl_on_bound(void *arg)
{
    lg_op *g = arg;
    for (size_t i = 0; i < g->n && g->pending > 0; i++) {
        if (g->ops[i] == NULL || !rlk_loop_reentrant_abandon(g->ops[i])) {
            continue;
        }
        g->ops[i] = NULL;
        g->pending--;
        lg_note(g, rlk_err(RLOCK_ECONN,
                           "server %zu (%s) did not answer within "
                           "redlock_server_timeout_ms (%lld ms)",
                           i, g->m[i]->name,
                           (long long)g->m[i]->client->opts.redlock_server_timeout_ms));
    }
    if (g->pending == 0) {
        rl_decide(g);
    }
}

/* The least lease among the members: the group's validity is bounded by it. */
static int64_t rl_min_lease(const lg_op *g)
{
    int64_t min = INT64_MAX;
    for (size_t i = 0; i < g->n; i++) {
        int64_t le =
            g->args.lease_ms > 0 ? g->args.lease_ms : g->m[i]->client->opts.watchdog_timeout_ms;
        min = le < min ? le : min;
    }
    return min;
}

/* Every server answered: a majority with validity left (the elapsed time and a clock drift of 1%
 * + 2 ms taken off the least lease) holds the group; otherwise everything is given back. */
static void rl_decide(lg_op *g)
{
    if (g->bound != NULL) {
        g->loop.timer_stop(g->bound);
    }
    if (g->end_rc != RLOCK_OK) {
        lg_give_back(g, g->end_rc);
        return;
    }
    int64_t min = rl_min_lease(g);
    int64_t validity = min - (rlk_now_ms() - g->start) - (min / 100 + 2);
    if (g->grants >= g->quorum && validity > 0) {
        lg_granted(g);
        lg_finish(g, RLOCK_OK, "");
        return;
    }
    lg_give_back(g, LG_RETRY);
}

/* ---- both groups ------------------------------------------------------------------------- */

static void lg_round(lg_op *g)
{
    int r = rlk_cancel_check(g->args.cancel, "group lock", g->m[0]->name);
    if (r != RLOCK_OK) {
        lg_note(g, r);
        lg_finish(g, r, "cancelled");
    } else if (g->redlock) {
        rl_attempt(g);
    } else {
        mu_round(g);
    }
}

static void lg_on_timer(void *arg)
{
    lg_op *g = arg;
    lg_unwatch(g);
    lg_round(g);
}

/* The token fired, or member 0's client is being freed, during a pause: nothing is held, so
 * the group ends at once. */
static void lg_watch_wake(rlk_loop_op *op, int why)
{
    lg_op *g = RLK_CONTAINER_OF(op, lg_op, watch);
    if (why != RLK_LOOP_CANCEL && why != RLK_LOOP_CLOSE) {
        return;
    }
    lg_unwatch(g);
    g->loop.timer_stop(g->timer);
    int rc = why == RLK_LOOP_CLOSE ? RLOCK_ECLOSED : RLOCK_ECANCELED;
    g->msg[0] = '\0';
    lg_finish(g, rc, rc == RLOCK_ECLOSED ? "a member's client was freed" : "cancelled");
}

/* Starts the pause before the next round, watched by the token and member 0's client. */
static void lg_pause_start(lg_op *g, int64_t ms)
{
    rlock_client *c = g->m[0]->client;
    rlk_loop_client *lc = rlk_client_check(c) == RLOCK_OK ? rlk_loop_of(c) : NULL;
    static const rlk_loop_op_type watch_type = {.wake = lg_watch_wake};
    if (lc != NULL && rlk_loop_op_add(lc, &g->watch, g->args.cancel, &watch_type) == RLOCK_OK) {
        g->watching = 1;
    }
    if (g->loop.timer_start(g->timer, ms) != 0) {
        lg_finish(g, rlk_err(RLOCK_ENOMEM, "the loop's timer failed"), "pause");
    }
}

static void lg_member_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    lg_member *c = user_data;
    lg_op *g = c->g;
    g->ops[c->i] = NULL; /* freed after this call */
    g->pending--;
    if (rc != RLOCK_OK && rc != RLOCK_ETIMEDOUT) {
        lg_note(g, rc);
    }
    if (!g->redlock) {
        mu_member(g, c->i, rc);
        return;
    }
    rl_count(g, c->i, rc);
    if (g->pending == 0) {
        rl_decide(g);
    }
}

/* The pause before the next round: the multi-lock's random one after two failed rounds, a
 * RedLock's in [1, 2 x the largest per-server timeout] ms (lock_multi.c, lock_redlock.c). */
static int64_t lg_pause(lg_op *g)
{
    if (!g->redlock) {
        if (++g->failures < 2) {
            return 0;
        }
        int64_t cap =
            g->failures * 2 > LG_MULTI_MAX_BACKOFF_MS ? LG_MULTI_MAX_BACKOFF_MS : g->failures * 2;
        return (int64_t)(rlk_group_rand() % (uint64_t)(cap + 1));
    }
    return 1 + (int64_t)(rlk_group_rand() % (uint64_t)(2 * rl_server_timeout(g)));
}

/* What was taken is given back: report end_rc, or pause and try again while the budget lasts. */
static void lg_after_back(lg_op *g)
{
    if (g->end_rc != LG_RETRY) {
        lg_finish(g, g->end_rc, "a member failed");
        return;
    }
    if (g->args.wait_ms == 0 || rlk_now_ms() >= g->deadline) {
        if (g->redlock && g->grants + g->busy < g->quorum && g->err != RLOCK_OK) {
            lg_finish(g, g->err, "fewer than a majority of servers answered");
            return;
        }
        g->msg[0] = '\0';
        lg_finish(g, RLOCK_ETIMEDOUT, "not every member could be taken in time");
        return;
    }
    int64_t pause = lg_pause(g);
    int64_t left = g->deadline == INT64_MAX ? pause : g->deadline - rlk_now_ms();
    lg_pause_start(g, pause < left ? pause : left);
}

/* The owner's number: the owner must belong to one of the members' clients. */
static int lg_owner(const rlock_owner *owner, rlock *const *m, size_t n, uint64_t *tid)
{
    for (size_t i = 0; owner != NULL && i < n; i++) {
        if (rlk_owner_tid(owner, m[i]->client, "group", tid) == RLOCK_OK) {
            return RLOCK_OK;
        }
    }
    return rlk_err(RLOCK_EINVAL, "an owner of one of the group's member clients is required "
                                 "(rlock_owner_new)");
}

/* The checks of rlock_lock_async() on a group that need no allocation. */
static int lg_check(const rlock_lock_args *args, rlock_done_fn done)
{
    if (args == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_async: lock, args and done must not be NULL");
    }
    for (size_t i = 0; i < sizeof(args->reserved) / sizeof(args->reserved[0]); i++) {
        if (args->reserved[i] != NULL) {
            return rlk_err(RLOCK_EINVAL, "rlock_lock_async: reserved fields must be NULL");
        }
    }
    if ((args->wait_ms < 0 && args->wait_ms != RLOCK_WAIT_FOREVER) || args->lease_ms == 0 ||
        args->lease_ms > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_async: bad wait_ms or lease_ms");
    }
    if (args->owner == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_async: an owner is required (rlock_owner_new)");
    }
    return rlk_cancel_check(args->cancel, "group lock", "group");
}

int rlk_loop_group_lock(rlock *group, const rlock_lock_args *args, rlock_done_fn done,
                        void *user_data)
{
    rlock *const *m = NULL;
    size_t n = 0;
    rlock_loop loop;
    int r = lg_check(args, done);
    r = r ? r : lg_members(group, &m, &n, &loop, 0);
    uint64_t tid = 0;
    r = r ? r : lg_owner(args->owner, m, n, &tid);
    if (r != RLOCK_OK) {
        return r;
    }
    lg_op *g = lg_alloc(group, m, n, done, user_data);
    if (g == NULL) {
        return RLOCK_ENOMEM;
    }
    g->loop = loop;
    g->args = *args;
    g->tid = tid;
    g->deadline = args->wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), args->wait_ms);
    /* The first round starts on the loop's next turn, so done never runs inside this call. */
    g->timer = loop.timer_new(loop.loop_data, lg_on_timer, g);
    /* Without a bound timer a RedLock attempt waits for every server (command_timeout_ms). */
    g->bound = g->redlock ? loop.timer_new(loop.loop_data, rl_on_bound, g) : NULL;
    if (g->timer == NULL || loop.timer_start(g->timer, 0) != 0) {
        lg_free(g);
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: the loop gave no timer");
    }
    return RLOCK_OK;
}

/* ---- release ------------------------------------------------------------------------------- */

/* A member's release answered: once all have, the group's outcome. A multi-lock reports the
 * first member's error; a RedLock succeeds with a majority of servers released. */
static void lg_unlock_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    lg_op *g = ((lg_member *)user_data)->g;
    g->unlock_ok += rc == RLOCK_OK;
    g->notowner += rc == RLOCK_ENOTOWNER;
    lg_note(g, rc);
    if (--g->pending > 0) {
        return;
    }
    int n = (int)g->n;
    if (g->unlock_ok == n || (g->redlock && g->unlock_ok >= g->quorum)) {
        lg_finish(g, RLOCK_OK, "");
    } else if (g->notowner == n) {
        lg_finish(g, RLOCK_ENOTOWNER, "the owner does not hold the group");
    } else if (g->redlock) {
        lg_finish(g, RLOCK_ELOST, "fewer than a majority of servers still had the hold");
    } else {
        lg_finish(g, g->err, "unlocking a member failed");
    }
}

int rlk_loop_group_unlock(rlock *group, rlock_owner *owner, rlock_done_fn done, void *user_data)
{
    rlock *const *m = NULL;
    size_t n = 0;
    rlock_loop loop;
    uint64_t tid = 0;
    int r = lg_members(group, &m, &n, &loop, 1);
    r = r ? r : lg_owner(owner, m, n, &tid);
    lg_op *g = r == RLOCK_OK ? lg_alloc(group, m, n, done, user_data) : NULL;
    if (g == NULL) {
        return r != RLOCK_OK ? r : RLOCK_ENOMEM;
    }
    g->tid = tid;
    rlk_hold_cb_drop(group, tid); /* released on purpose: no loss to report */
    for (size_t i = 0; i < n; i++) {
        r = rlk_loop_unlock_start(m[i], g->tid, lg_unlock_done, &g->ctx[i]);
        g->pending += r == RLOCK_OK;
        lg_note(g, r);
        g->notowner += r == RLOCK_ENOTOWNER;
    }
    if (g->pending == 0) {
        r = g->err != RLOCK_OK ? g->err : RLOCK_ENOMEM;
        lg_free(g);
        return r;
    }
    return RLOCK_OK;
}
