/*
 * The multi-lock (Redisson RMultiLock): one handle over n member handles of any types, clients
 * and servers, taken all-or-nothing.
 *
 * Acquisition works in rounds. A round takes the members one after the other with a single
 * attempt each (wait 0). When a member is busy, the round gives back every hold it took (through
 * the members' own unlock, so only the calling thread's holds are touched) and the next round
 * starts by waiting for that busy member through its normal pub/sub notification, with the time
 * that is left; once it is granted, the round continues with single attempts on the others.
 * No thread ever waits while it holds a member of the group, so two groups that overlap in
 * opposite orders cannot deadlock. A round fails only because another thread took a member in
 * between, i.e. someone else made progress; after two failed rounds in a row a short random
 * pause (growing to at most 20 ms) breaks the symmetric case in which two threads keep taking
 * each other's next member, so the groups do not livelock either.
 *
 * Leases: with lease_ms > 0 every member gets that lease, counted from its own grant. All grants
 * of a successful round happen in one sweep of single attempts that starts when the first
 * member is granted, so the members' leases end at most one sweep apart. If the sweep itself
 * took as long as the lease, the first member may already have expired: the round is then
 * undone and retried, so a group is never returned with an already expired member. (Redisson
 * instead takes every member with a lease of 2 x wait and shortens it afterwards with PEXPIRE;
 * that keeps the keys of a crashed client for up to 2 x wait, which we avoid.) With
 * lease_ms < 0 each member is kept alive by its own client's watchdog.
 *
 * The group keeps a per-thread count of the group holds it handed out, so that unlocking a group
 * that the thread does not hold reports RLOCK_ENOTOWNER without touching members that the thread
 * may hold on their own. A re-entry takes every member again (each member counts it) and an
 * unlock releases one hold of every member.
 *
 * This file also holds what both group types share (lock_group.h): the member checks, the
 * random pauses, and RedLock's parallel round (one command to every server before any reply is
 * read, replies collected with poll() under per-server timeouts).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock.h"
#include "lock_group.h"

/* The longest random pause between failed rounds, in ms. */
#define RLK_MULTI_MAX_BACKOFF_MS 20

typedef struct rlk_multi {
    size_t n;
    rlock **members; /* borrowed handles, in the caller's order */
} rlk_multi;

static rlk_multi *rlk_multi_of(rlock *l)
{
    return (rlk_multi *)l->impl;
}

uint64_t rlk_group_rand(void)
{
    static _Thread_local uint64_t state;
    if (state == 0) {
        state = (rlk_thread_id() * UINT64_C(0x9E3779B97F4A7C15)) ^ (uint64_t)rlk_now_us() ^
                ((uint64_t)(uintptr_t)&state << 17);
        state |= 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

void rlk_group_sleep_ms(int64_t ms)
{
    if (ms <= 0) {
        return;
    }
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms % 1000) * 1000000)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Gives back one hold of each of the first k members taken in this round (taken[i] != 0). */
static void rlk_multi_giveback(rlk_multi *m, const unsigned char *taken)
{
    for (size_t i = 0; i < m->n; i++) {
        if (taken[i]) {
            /* Only the calling thread's hold is released; an error here (connection lost)
             * leaves a hold that expires with its lease, and the round still fails. */
            (void)rlock_unlock(m->members[i]);
        }
    }
}

/* Remaining wait for a member call: RLOCK_WAIT_FOREVER without a deadline. */
static int64_t rlk_multi_left(int64_t deadline)
{
    if (deadline == INT64_MAX) {
        return RLOCK_WAIT_FOREVER;
    }
    int64_t left = deadline - rlk_now_ms();
    return left > 0 ? left : 0;
}

/* One round. first is the member to wait for (or SIZE_MAX for none). Returns RLOCK_OK with every
 * member held, RLOCK_ETIMEDOUT with *busy set to the member that was busy (nothing held), or
 * another error (nothing held). */
static int rlk_multi_round(rlk_multi *m, unsigned char *taken, size_t first, int64_t deadline,
                           int64_t lease_ms, size_t *busy)
{
    memset(taken, 0, m->n);
    int64_t sweep_start = 0;
    if (first != SIZE_MAX) {
        int rc = rlock_try_lock(m->members[first], rlk_multi_left(deadline), lease_ms);
        if (rc != RLOCK_OK) {
            *busy = SIZE_MAX; /* the wait ran out (or failed): nothing to retry */
            return rc;
        }
        taken[first] = 1;
        sweep_start = rlk_now_ms();
    }
    for (size_t i = 0; i < m->n; i++) {
        if (taken[i]) {
            continue;
        }
        int rc = rlock_try_lock(m->members[i], 0, lease_ms);
        if (rc != RLOCK_OK) {
            rlk_multi_giveback(m, taken);
            *busy = rc == RLOCK_ETIMEDOUT ? i : SIZE_MAX;
            return rc;
        }
        taken[i] = 1;
        if (sweep_start == 0) {
            sweep_start = rlk_now_ms();
        }
    }
    if (lease_ms > 0 && rlk_now_ms() - sweep_start >= lease_ms) {
        /* The first member's lease may have run out while the others were taken. */
        rlk_multi_giveback(m, taken);
        *busy = first != SIZE_MAX ? first : 0;
        return rlk_err(RLOCK_ETIMEDOUT, "multi-lock: the sweep outlasted the %lld ms lease",
                       (long long)lease_ms);
    }
    return RLOCK_OK;
}

static int rlk_multi_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    rlk_multi *m = rlk_multi_of(l);
    unsigned char small[64];
    unsigned char *taken = m->n <= sizeof(small) ? small : malloc(m->n);
    if (taken == NULL) {
        return rlk_err(RLOCK_ENOMEM, "multi-lock: out of memory");
    }
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    size_t first = SIZE_MAX;
    int failures = 0;
    int rc;
    for (;;) {
        size_t busy = SIZE_MAX;
        rc = rlk_multi_round(m, taken, first, deadline, lease_ms, &busy);
        if (rc != RLOCK_ETIMEDOUT || wait_ms == 0 || rlk_now_ms() >= deadline) {
            break;
        }
        if (busy == SIZE_MAX) {
            break; /* the wait for the busy member itself ran out */
        }
        failures++;
        if (failures >= 2) {
            int64_t cap =
                failures * 2 > RLK_MULTI_MAX_BACKOFF_MS ? RLK_MULTI_MAX_BACKOFF_MS : failures * 2;
            int64_t pause = (int64_t)(rlk_group_rand() % (uint64_t)(cap + 1));
            int64_t left = deadline == INT64_MAX ? pause : deadline - rlk_now_ms();
            rlk_group_sleep_ms(pause < left ? pause : left);
        }
        first = busy;
    }
    if (taken != small) {
        free(taken);
    }
    if (rc == RLOCK_OK) {
        /* The group's own per-thread count lives in the handle's hold records (lock.h). */
        rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 1);
        if (h == NULL) {
            for (size_t i = 0; i < m->n; i++) {
                (void)rlock_unlock(m->members[i]);
            }
            return rlk_err(RLOCK_ENOMEM, "multi-lock: out of memory recording the hold");
        }
        h->count++;
    } else if (rc == RLOCK_ETIMEDOUT) {
        rlk_err(RLOCK_ETIMEDOUT, "multi-lock: not every member could be taken within %lld ms",
                (long long)wait_ms);
    }
    return rc;
}

static int rlk_multi_unlock(rlock *l)
{
    rlk_multi *m = rlk_multi_of(l);
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    if (h == NULL || h->count <= 0) {
        return rlk_err(RLOCK_ENOTOWNER, "multi-lock: the calling thread does not hold the group");
    }
    int first_err = RLOCK_OK;
    char msg[256] = "";
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_unlock(m->members[i]);
        if (rc != RLOCK_OK && first_err == RLOCK_OK) {
            first_err = rc;
            snprintf(msg, sizeof(msg), "%s", rlock_last_error());
        }
    }
    h->count--;
    rlk_hold_drop_if_empty(l, h);
    if (first_err != RLOCK_OK) {
        return rlk_err(first_err, "multi-lock: unlocking a member failed: %s", msg);
    }
    return RLOCK_OK;
}

int rlk_group_unsupported(rlock *l)
{
    (void)l;
    return rlk_err(RLOCK_ENOTSUP, "not supported on a multi-lock or RedLock group");
}

int64_t rlk_group_ttl(rlock *l)
{
    return RLOCK_TTL_ERROR(rlk_group_unsupported(l));
}

static int rlk_multi_is_locked(rlock *l)
{
    rlk_multi *m = rlk_multi_of(l);
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_is_locked(m->members[i]);
        if (rc != 0) {
            return rc; /* 1 (some member is locked) or an error */
        }
    }
    return 0;
}

static int rlk_multi_is_held(rlock *l)
{
    rlk_multi *m = rlk_multi_of(l);
    for (size_t i = 0; i < m->n; i++) {
        int rc = rlock_is_held(m->members[i]);
        if (rc != 1) {
            return rc; /* 0 (some member is not held) or an error */
        }
    }
    return 1;
}

static uint64_t rlk_multi_token(rlock *l)
{
    (void)l;
    return 0;
}

static void rlk_multi_destroy(rlock *l)
{
    rlk_multi *m = rlk_multi_of(l);
    if (m == NULL) {
        return;
    }
    while (l->holds != NULL) { /* holds of threads that never unlocked */
        rlk_hold *h = l->holds;
        l->holds = h->next;
        free(h);
    }
    free(m->members);
    free(m);
    l->impl = NULL;
}

static const rlk_lock_ops rlk_multi_ops = {
    .acquire = rlk_multi_acquire,
    .unlock = rlk_multi_unlock,
    .force_unlock = rlk_group_unsupported,
    .is_locked = rlk_multi_is_locked,
    .is_held = rlk_multi_is_held,
    .hold_count = rlk_group_unsupported,
    .ttl = rlk_group_ttl,
    .token = rlk_multi_token,
    .destroy = rlk_multi_destroy,
};

int rlk_group_check_members(rlock *const *locks, size_t n, int redlock)
{
    const char *what = redlock ? "rlock_redlock_new" : "rlock_multi_new";
    if (locks == NULL || n == 0 || (redlock && n > RLK_REDLOCK_MAX)) {
        return rlk_err(RLOCK_EINVAL, "%s: needs 1 to %s member locks", what,
                       redlock ? "16" : "any number of");
    }
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL || locks[i]->client == NULL) {
            return rlk_err(RLOCK_EINVAL, "%s: member %zu is NULL or a group", what, i);
        }
        if (redlock && (locks[i]->kind != RLOCK_REENTRANT || locks[i]->single == NULL)) {
            return rlk_err(RLOCK_ENOTSUP, "%s: member %zu: only reentrant locks", what, i);
        }
        for (size_t j = 0; j < i; j++) {
            if (locks[j] == locks[i] || (redlock && locks[j]->client == locks[i]->client)) {
                return rlk_err(RLOCK_EINVAL, "%s: members %zu and %zu are the same handle%s", what,
                               j, i, redlock ? " or share a client" : "");
            }
        }
    }
    return RLOCK_OK;
}

RLOCK_EXPORT rlock *rlock_multi_new(rlock *const *locks, size_t n)
{
    if (rlk_group_check_members(locks, n, 0) != RLOCK_OK) {
        return NULL;
    }
    rlk_multi *m = calloc(1, sizeof(*m));
    rlock **copy = calloc(n, sizeof(*copy));
    rlock *l = (m != NULL && copy != NULL) ? rlk_handle_alloc(&rlk_multi_ops) : NULL;
    if (l == NULL) {
        free(m);
        free(copy);
        rlk_err(RLOCK_ENOMEM, "rlock_multi_new: out of memory");
        return NULL;
    }
    memcpy(copy, locks, n * sizeof(*copy));
    m->n = n;
    m->members = copy;
    l->impl = m;
    return l;
}

int64_t rlk_group_server_timeout(const rlock *m)
{
    int64_t t = m->client->opts.redlock_server_timeout_ms;
    return t > 0 ? t : 50;
}

/* ---- the parallel round of RedLock
 * ------------------------------------------------------------------ */

void rlk_rl_round_init(rlk_rl_round *r, rlock *const *members, size_t n)
{
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->members = members;
}

/* Starts a new command on the servers whose io is active (keys/args filled by the caller). */
void rlk_rl_prepare(rlk_rl_round *r, int script)
{
    r->script = script;
    r->need = 0;
    r->hard_deadline = 0;
    for (size_t i = 0; i < r->n; i++) {
        rlk_rl_io *io = &r->io[i];
        io->active = 0;
        io->waiting = 0;
        io->retried = 0;
        io->err = RLOCK_OK;
        if (io->reply != NULL) {
            freeReplyObject(io->reply);
            io->reply = NULL;
        }
        rlk_args_init(&io->keys);
        rlk_args_init(&io->args);
    }
}

static int rlk_rl_flush(rlk_conn *conn)
{
    int done = 0;
    do {
        if (redisBufferWrite(conn->ctx, &done) == REDIS_ERR) {
            return rlk_conn_error(conn->ctx, "RedLock: sending");
        }
    } while (!done);
    return RLOCK_OK;
}

/* Appends and flushes io's command. */
static int rlk_rl_send_one(rlk_rl_round *r, size_t i)
{
    rlk_rl_io *io = &r->io[i];
    int rc = RLOCK_OK;
    if (io->conn == NULL) {
        rc = rlk_pool_borrow(r->members[i]->client->pool, &io->conn);
        io->stale = 0;
    }
    if (rc == RLOCK_OK && r->script >= 0) {
        rc = rlk_script_append(io->conn, r->script, &io->keys, &io->args);
    } else if (rc == RLOCK_OK) {
        rc = redisAppendCommandArgv(io->conn->ctx, io->args.n, io->args.v, io->args.len) == REDIS_OK
                 ? RLOCK_OK
                 : rlk_conn_error(io->conn->ctx, "RedLock: appending");
    }
    rc = rc == RLOCK_OK ? rlk_rl_flush(io->conn) : rc;
    if (rc != RLOCK_OK) {
        io->err = rc;
        if (io->conn != NULL) {
            rlk_pool_return(r->members[i]->client->pool, io->conn, 1);
            io->conn = NULL;
        }
        return rc;
    }
    io->waiting = !io->stale;
    io->deadline = rlk_now_ms() + rlk_group_server_timeout(r->members[i]);
    return RLOCK_OK;
}

static struct timeval rlk_rl_tv(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

/* Handles a reply: a NOSCRIPT is answered by loading the script (bounded by the per-server
 * timeout) and sending the command again, once. */
static void rlk_rl_take_reply(rlk_rl_round *r, size_t i, redisReply *rep)
{
    rlk_rl_io *io = &r->io[i];
    io->waiting = 0;
    if (r->script >= 0 && !io->retried && rlk_reply_is_noscript(rep)) {
        freeReplyObject(rep);
        io->retried = 1;
        redisSetTimeout(io->conn->ctx, rlk_rl_tv(rlk_group_server_timeout(r->members[i])));
        int rc = rlk_script_load(io->conn, r->script);
        struct timeval ctv = rlk_rl_tv(r->members[i]->client->opts.command_timeout_ms);
        if (rc == RLOCK_OK && redisSetTimeout(io->conn->ctx, ctv) != REDIS_OK) {
            rc = rlk_conn_error(io->conn->ctx, "RedLock: restoring the command timeout");
        }
        if (rc == RLOCK_OK) {
            (void)rlk_rl_send_one(r, i);
        } else {
            io->err = rc;
            io->stale = 1; /* the load's reply may still come: never read this connection */
        }
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        io->err = rlk_err(RLOCK_EREDIS, "RedLock: server %zu: %s", i, rep->str);
        freeReplyObject(rep);
        return;
    }
    io->reply = rep;
}

/* No reply is read from io any more: the connection is only written to from now on. */
static void rlk_rl_give_up(rlk_rl_io *io, int err)
{
    io->waiting = 0;
    io->stale = 1;
    io->err = err;
}

/* Answers received so far in this round (replies, error replies included). */
static int rlk_rl_answered(const rlk_rl_round *r)
{
    int answered = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rlk_rl_io *io = &r->io[i];
        answered += io->active && !io->waiting && !io->stale && io->conn != NULL;
    }
    return answered;
}

/* Reads every awaited reply until it arrived or its server's deadline passed; while fewer than
 * r->need servers answered, the deadlines stretch to r->hard_deadline. */
static void rlk_rl_collect(rlk_rl_round *r)
{
    struct pollfd pf[RLK_REDLOCK_MAX];
    size_t idx[RLK_REDLOCK_MAX];
    for (;;) {
        for (size_t i = 0; i < r->n; i++) {
            rlk_rl_io *io = &r->io[i];
            void *rep = NULL;
            if (!io->waiting) {
                continue;
            }
            if (redisGetReplyFromReader(io->conn->ctx, &rep) == REDIS_ERR) {
                rlk_rl_give_up(io, rlk_conn_error(io->conn->ctx, "RedLock: reading a reply"));
            } else if (rep != NULL) {
                rlk_rl_take_reply(r, i, rep);
            }
        }
        /* Decided after taking every reply already read, so a majority that has just answered
         * ends the patience at once. */
        int64_t now = rlk_now_ms();
        int64_t wait = INT64_MAX;
        int patient = rlk_rl_answered(r) < r->need && now < r->hard_deadline;
        nfds_t nf = 0;
        for (size_t i = 0; i < r->n; i++) {
            rlk_rl_io *io = &r->io[i];
            int64_t deadline =
                patient && r->hard_deadline > io->deadline ? r->hard_deadline : io->deadline;
            if (io->waiting && now >= deadline) {
                rlk_rl_give_up(io, rlk_err(RLOCK_ECONN, "RedLock: no answer from server %zu", i));
            }
            if (io->waiting) {
                pf[nf].fd = io->conn->ctx->fd;
                pf[nf].events = POLLIN;
                pf[nf].revents = 0;
                idx[nf++] = i;
                wait = deadline - now < wait ? deadline - now : wait;
            }
        }
        if (nf == 0) {
            return;
        }
        if (poll(pf, nf, (int)(wait > 0 ? wait : 0)) <= 0) {
            continue;
        }
        for (nfds_t k = 0; k < nf; k++) {
            rlk_rl_io *io = &r->io[idx[k]];
            if (pf[k].revents != 0 && redisBufferRead(io->conn->ctx) == REDIS_ERR) {
                rlk_rl_give_up(io, rlk_conn_error(io->conn->ctx, "RedLock: reading a reply"));
            }
        }
    }
}

void rlk_rl_run(rlk_rl_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->io[i].active) {
            (void)rlk_rl_send_one(r, i);
        }
    }
    rlk_rl_collect(r);
}

void rlk_rl_round_end(rlk_rl_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        rlk_rl_io *io = &r->io[i];
        if (io->reply != NULL) {
            freeReplyObject(io->reply);
            io->reply = NULL;
        }
        if (io->conn != NULL) {
            rlk_pool_return(r->members[i]->client->pool, io->conn, io->stale || io->waiting);
            io->conn = NULL;
        }
    }
}

void rlk_rl_patient(rlk_rl_round *r)
{
    int64_t t = 0;
    for (size_t i = 0; i < r->n; i++) {
        int64_t c = r->members[i]->client->opts.command_timeout_ms;
        t = c > t ? c : t;
    }
    r->need = (int)(r->n / 2 + 1);
    r->hard_deadline = rlk_add_sat(rlk_now_ms(), t);
}

int rlk_rl_wrap(int code, const char *what)
{
    /* Copied first: the last error is the very buffer rlk_err() writes. */
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", rlock_last_error());
    return rlk_err(code, "RedLock: %s: %s", what, detail);
}

int64_t rlk_rl_pause(rlock *const *members, size_t n)
{
    int64_t t = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t s = rlk_group_server_timeout(members[i]);
        t = s > t ? s : t;
    }
    return 1 + (int64_t)(rlk_group_rand() % (uint64_t)(2 * t));
}
