/*
 * Semaphores: handles, setup, queries and plain permits (Redisson RSemaphore data). Leased
 * permits are in semaphore_leased.c. Waiting is the shared notification wait (notified_wait.c) on
 * redisson_sc:{name} in counting mode: a message N gives at most N local waiters a re-attempt.
 * Requests (also the latch's): a call that changes counts carries a request key, so that it is
 * resent after a lost reply and applied once, and an acquire that lost a reply is settled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "pool.h"
#include "pubsub.h"
#include "replica.h"
#include "scripts.h"
#include "semaphore.h"
#include "notified_wait.h"
#include "semaphore_leased.h"

static void sem_settle_pending(rlock_semaphore *sem);
static void sem_drop_pending(rlock_semaphore *sem);

int64_t rlk_epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rlk_sem_hex(const unsigned char id[16], char out[RLOCK_PERMIT_ID_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[RLOCK_PERMIT_ID_LEN] = '\0';
}

int rlk_sem_req_init(rlk_sem_req *q, const char *name, size_t len, int braces)
{
    unsigned char id[16];
    char suffix[sizeof("rlock_request:") + RLOCK_PERMIT_ID_LEN];
    uuid_generate_random(id);
    memcpy(suffix, "rlock_request:", sizeof("rlock_request:") - 1);
    rlk_sem_hex(id, suffix + sizeof("rlock_request:") - 1);
    rlk_buf_init(&q->key);
    q->lost = 0;
    int r = braces ? rlk_buf_appends(&q->key, "{") : rlk_suffix_name(&q->key, name, len, suffix);
    if (braces && r == RLOCK_OK) {
        r = rlk_buf_append(&q->key, name, len);
        r = r ? r : rlk_buf_appends(&q->key, "}:");
        r = r ? r : rlk_buf_appends(&q->key, suffix);
    }
    if (r != RLOCK_OK) {
        rlk_buf_free(&q->key);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a request key");
    }
    return RLOCK_OK;
}

void rlk_sem_req_free(rlk_sem_req *q)
{
    rlk_buf_free(&q->key);
}

int64_t rlk_sem_req_ttl(const rlock_client *c)
{
    /* A call's last resend runs within 3 command timeouts of its first copy, and an acquire's
     * settlement within 3 more; the margin covers copies that a stalled server runs late. */
    int64_t ct = c->opts.command_timeout_ms;
    return rlk_add_sat(ct > RLOCK_MAX_DURATION_MS / 6 ? RLOCK_MAX_DURATION_MS : 6 * ct, 10000);
}

/* The text of the last error (code's) without the "<code's message>: " that rlk_err() put in
 * front, copied to buf, so that a later message can quote it without repeating that prefix. */
static const char *sem_detail(int code, char *buf, size_t size)
{
    const char *msg = rlock_last_error();
    const char *prefix = rlock_strerror(code);
    size_t n = strlen(prefix);
    if (strncmp(msg, prefix, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') {
        msg += n + 2;
    }
    snprintf(buf, size, "%s", msg);
    return buf;
}

static void sem_pause(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int rlk_sem_run(rlock_client *c, rlk_sem_req *q, int script, const rlk_args *keys,
                const rlk_args *args, redisReply **out, const char *what, const char *name)
{
    int64_t deadline = INT64_MAX;
    int64_t pause = 2;
    for (int tries = 1;; tries++) {
        int r = rlk_script(c, script, 0, keys, args, out);
        if (r != RLOCK_ECONN && r != RLOCK_ETLS) {
            return r;
        }
        q->lost = 1;
        /* Resends start within command_timeout_ms of the first lost reply (the try that lost
         * it may have used a whole command timeout already). */
        if (deadline == INT64_MAX) {
            deadline = rlk_add_sat(rlk_now_ms(), c->opts.command_timeout_ms);
        }
        int64_t left = deadline - rlk_now_ms();
        if (left <= 0 || rlk_client_check(c) != RLOCK_OK) {
            char last[256];
            return rlk_err(r, "%s of '%s': no reply after %d tries, resent for %lld ms (%s)", what,
                           name, tries, (long long)c->opts.command_timeout_ms,
                           sem_detail(r, last, sizeof(last)));
        }
        /* The pool dials again at once after a broken connection, and answers at once while its
         * dial backoff runs: short pauses keep the resends from spinning. */
        sem_pause(pause < left ? pause : left);
        pause = pause < 64 ? pause * 2 : pause;
    }
}

int rlk_sem_check(rlock_semaphore *sem)
{
    if (sem == NULL) {
        return rlk_err(RLOCK_EINVAL, "semaphore must not be NULL");
    }
    int r = rlk_client_enter(sem->client);
    r = r ? r : rlk_client_blocking(sem->client, "a semaphore call");
    if (r == RLOCK_OK) {
        rlk_sem_refresh(sem);
        sem_settle_pending(sem);
    }
    return r;
}

int rlk_sem_check_cancel(rlock_semaphore *sem, const rlock_cancel *cancel)
{
    if (sem == NULL) {
        return rlk_err(RLOCK_EINVAL, "semaphore must not be NULL");
    }
    int r = rlk_cancel_check(cancel, "semaphore", sem->name);
    return r ? r : rlk_sem_check(sem);
}

void rlk_sem_refresh(rlock_semaphore *sem)
{
    if (!rlk_fork_stale(&sem->gen)) {
        return;
    }
    rlk_fork_lock();
    if (rlk_fork_stale(&sem->gen)) {
        /* As a lock handle's (lock.c): the mutex may have been held by a parent thread, which
         * only ever linked and unlinked records with single stores; the watchdog entries sat in
         * the parent's watchdog, which the child abandoned, so the records are freed without a
         * cancel. */
        pthread_mutex_init(&sem->mu, NULL);
        while (sem->permits != NULL) {
            rlk_permit *p = sem->permits;
            sem->permits = p->next;
            free(p);
        }
        sem_drop_pending(sem); /* the parent settles its own calls */
        atomic_store_explicit(&sem->gen, rlk_fork_gen(), memory_order_release);
    }
    rlk_fork_unlock();
}

RLOCK_EXPORT rlock_semaphore *rlock_semaphore_open(rlock_client *client, const char *name)
{
    if (client == NULL) {
        rlk_err(RLOCK_EINVAL, "client must not be NULL");
        return NULL;
    }
    if (rlk_client_enter(client) != RLOCK_OK || rlk_check_name(name, "semaphore") != RLOCK_OK ||
        rlk_check_cluster_name(client, name, "semaphore") != RLOCK_OK) {
        return NULL;
    }
    size_t len = strlen(name);
    rlock_semaphore *sem = calloc(1, sizeof(*sem) + len + 1);
    if (sem == NULL) {
        rlk_err(RLOCK_ENOMEM, "cannot allocate a semaphore handle");
        return NULL;
    }
    memcpy(sem->name, name, len + 1);
    sem->name_len = len;
    rlk_buf_init(&sem->channel);
    rlk_buf_init(&sem->timeout);
    if (rlk_prefix_name(&sem->channel, "redisson_sc", name, len) != RLOCK_OK ||
        rlk_suffix_name(&sem->timeout, name, len, "timeout") != RLOCK_OK) {
        rlk_buf_free(&sem->channel);
        rlk_buf_free(&sem->timeout);
        free(sem);
        rlk_err(RLOCK_ENOMEM, "cannot allocate a semaphore handle");
        return NULL;
    }
    pthread_mutex_init(&sem->mu, NULL);
    atomic_init(&sem->gen, rlk_fork_gen());
    sem->client = client;
    rlk_client_ref(client);
    return sem;
}

RLOCK_EXPORT void rlock_semaphore_free(rlock_semaphore *sem)
{
    if (sem == NULL) {
        return;
    }
    rlk_sem_forget_permits(sem);
    sem_drop_pending(sem);
    rlk_buf_free(&sem->channel);
    rlk_buf_free(&sem->timeout);
    pthread_mutex_destroy(&sem->mu);
    rlk_client_unref(sem->client);
    free(sem);
}

static int int_reply(const redisReply *r, long long *v, const char *what)
{
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_EPROTO, "%s: expected an integer reply, got type %d", what,
                   r ? r->type : -1);
}

void rlk_sem_call_args(const rlock_semaphore *sem, int script, int64_t arg, rlk_args *keys,
                       rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    if (script == RLK_SCRIPT_SEM_AVAILABLE) {
        rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    }
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_init(args);
    rlk_args_addi(args, arg);
}

/* Runs a one-argument script (rlk_sem_call_args()) and returns its integer reply in *v. */
static int sem_call(rlock_semaphore *sem, int script, int flags, int64_t arg, long long *v,
                    const char *what)
{
    rlk_args keys, args;
    rlk_sem_call_args(sem, script, arg, &keys, &args);
    redisReply *rep = NULL;
    int r = rlk_script(sem->client, script, flags, &keys, &args, &rep);
    if (r == RLOCK_OK) {
        r = int_reply(rep, v, what);
    }
    freeReplyObject(rep);
    return r;
}

/* Permit counts are Redis integers; bounding them to 2^31-1 keeps every sum of a count and a
 * delta far inside Lua's exact range of doubles. */
static int check_permits(int64_t n, int64_t min, const char *what)
{
    if (n < min || n > INT32_MAX) {
        return rlk_err(RLOCK_EINVAL, "%s must be in %lld .. %d, got %lld", what, (long long)min,
                       INT32_MAX, (long long)n);
    }
    return RLOCK_OK;
}

RLOCK_EXPORT int rlock_semaphore_try_set_permits(rlock_semaphore *sem, int64_t permits)
{
    int r = rlk_sem_check(sem);
    r = r ? r : check_permits(permits, 0, "permits");
    long long v = 0;
    r = r ? r : sem_call(sem, RLK_SCRIPT_SEM_TRY_SET, RLK_IDEMPOTENT, permits, &v, "sem_try_set");
    return r ? r : (int)v;
}

RLOCK_EXPORT int rlock_semaphore_add_permits(rlock_semaphore *sem, int64_t delta)
{
    int r = rlk_sem_check(sem);
    if (r == RLOCK_OK && (delta == 0 || delta < -INT32_MAX || delta > INT32_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "delta must be non-zero and within +-%d, got %lld", INT32_MAX,
                    (long long)delta);
    }
    long long v = 0;
    return r ? r : sem_call(sem, RLK_SCRIPT_SEM_ADD, 0, delta, &v, "sem_add");
}

RLOCK_EXPORT int64_t rlock_semaphore_available(rlock_semaphore *sem)
{
    int r = rlk_sem_check(sem);
    long long v = 0;
    r = r ? r
          : sem_call(sem, RLK_SCRIPT_SEM_AVAILABLE, RLK_IDEMPOTENT, rlk_epoch_ms(), &v,
                     "sem_available");
    return r ? r : v < 0 ? 0 : v;
}

void rlk_sem_attempt_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t n,
                          int64_t expiry, const unsigned char (*ids)[16], rlk_args *keys,
                          rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_init(args);
    rlk_args_addi(args, n);
    rlk_args_addi(args, rlk_epoch_ms());
    rlk_args_addi(args, expiry);
    rlk_args_addi(args, rlk_sem_req_ttl(sem->client));
    for (int64_t i = 0; ids != NULL && i < n; i++) {
        rlk_args_add(args, (const char *)ids[i], 16);
    }
}

int rlk_sem_attempt_reply(const rlock_semaphore *sem, const redisReply *rep, int64_t *hint_ms)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        return rlk_err(RLOCK_EPROTO, "sem_acquire on '%s': unexpected reply shape", sem->name);
    }
    int r = rep->element[0]->integer == 1;
    *hint_ms = r ? -1 : rep->element[1]->integer;
    return r;
}

int64_t rlk_sem_expiry(const rlock_semaphore *sem, int64_t lease_ms)
{
    int64_t lease = lease_ms > 0 ? lease_ms : sem->client->opts.watchdog_timeout_ms;
    return rlk_add_sat(rlk_epoch_ms(), lease);
}

/* One acquire attempt of n permits for the acquire call q, leased with ids (count n) or plain
 * (ids NULL): 1 acquired (now, or by an earlier attempt of q), 0 not (*hint_ms = ms until the
 * earliest lease runs out, or -1), or a negative error. */
static int sem_attempt(rlock_semaphore *sem, rlk_sem_req *q, int64_t n, int64_t expiry,
                       const unsigned char (*ids)[16], int64_t *hint_ms)
{
    rlk_args keys, args;
    rlk_sem_attempt_args(sem, q, n, expiry, ids, &keys, &args);
    redisReply *rep = NULL;
    int r = rlk_sem_run(sem->client, q, RLK_SCRIPT_SEM_ACQUIRE, &keys, &args, &rep,
                        "semaphore acquire", sem->name);
    if (r != RLOCK_OK) {
        return r;
    }
    r = rlk_sem_attempt_reply(sem, rep, hint_ms);
    freeReplyObject(rep);
    return r;
}

typedef struct rlk_sem_try {
    rlock_semaphore *sem;
    rlk_sem_req *q;
    int64_t n;
    int64_t lease_ms; /* > 0 lease, < 0 watchdog lease, 0 plain */
    const unsigned char (*ids)[16];
} rlk_sem_try;

static int sem_try_once(void *arg, int64_t *hint_ms)
{
    rlk_sem_try *t = arg;
    int64_t expiry = t->ids != NULL ? rlk_sem_expiry(t->sem, t->lease_ms) : 0;
    return sem_attempt(t->sem, t->q, t->n, expiry, t->ids, hint_ms);
}

void rlk_sem_release_id_args(const rlock_semaphore *sem, const rlk_sem_req *q,
                             const unsigned char id[16], rlk_args *keys, rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_init(args);
    rlk_args_add(args, (const char *)id, 16);
    rlk_args_addi(args, rlk_epoch_ms());
    rlk_args_addi(args, rlk_sem_req_ttl(sem->client));
}

/* Returns the permit on Redis: 1 released, 0 released after its lease ran out, -1 no such
 * permit, or a negative error. */
int rlk_sem_release_id(rlock_semaphore *sem, const unsigned char id[16], long long *v)
{
    rlk_sem_req q;
    int r = rlk_sem_req_init(&q, sem->name, sem->name_len, 0);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_sem_release_id_args(sem, &q, id, &keys, &args);
    redisReply *rep = NULL;
    r = rlk_sem_run(sem->client, &q, RLK_SCRIPT_SEM_RELEASE_LEASED, &keys, &args, &rep,
                    "leased release", sem->name);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "sem_release_leased: expected an integer reply");
    }
    if (r == RLOCK_OK) {
        *v = rep->integer;
    }
    freeReplyObject(rep);
    rlk_sem_req_free(&q);
    return r;
}

void rlk_sem_settle_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t n, int keep,
                         const unsigned char (*ids)[16], rlk_args *keys, rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_init(args);
    rlk_args_addi(args, n);
    rlk_args_addi(args, rlk_sem_req_ttl(sem->client));
    rlk_args_adds(args, keep ? "keep" : "give");
    for (int64_t i = 0; ids != NULL && i < n; i++) {
        rlk_args_add(args, (const char *)ids[i], 16);
    }
}

/* Settles the acquire call q (sem_acquire_cancel.lua in mode "keep" or "give"), resent after a
 * lost reply unless once is set: 2 its permits are kept, 1 they were given back, 0 it had taken
 * none and is now cancelled on Redis, or a negative error. */
static int sem_settle(rlock_semaphore *sem, rlk_sem_req *q, int64_t n, int keep,
                      const unsigned char (*ids)[16], int once)
{
    rlk_args keys, args;
    rlk_sem_settle_args(sem, q, n, keep, ids, &keys, &args);
    redisReply *rep = NULL;
    int r = once ? rlk_script(sem->client, RLK_SCRIPT_SEM_ACQUIRE_CANCEL, 0, &keys, &args, &rep)
                 : rlk_sem_run(sem->client, q, RLK_SCRIPT_SEM_ACQUIRE_CANCEL, &keys, &args, &rep,
                               "semaphore acquire settlement", sem->name);
    long long v = 0;
    r = r ? r : int_reply(rep, &v, "sem_acquire_cancel");
    freeReplyObject(rep);
    return r ? r : (int)v;
}

/* An acquire call that could not be settled because Redis stayed out of reach: the handle's
 * next call settles it (mode "give": its caller learnt of no permits). Settling is safe however
 * late: it gives back only what the request key says the call took. */
typedef struct rlk_sem_pending {
    struct rlk_sem_pending *next;
    rlk_sem_req q;
    int64_t n;
    unsigned char (*ids)[16]; /* n ids of a leased acquire (malloc'd), NULL for plain permits */
    int64_t until_ms; /* monotonic: the request key, the only trace of the permits, is gone */
} rlk_sem_pending;

static void sem_pending_push(rlock_semaphore *sem, rlk_sem_pending *p)
{
    pthread_mutex_lock(&sem->mu);
    p->next = sem->pending;
    sem->pending = p;
    atomic_store(&sem->has_pending, 1);
    pthread_mutex_unlock(&sem->mu);
}

/* Keeps a copy of q for sem_settle_pending() (none when out of memory: the warning stands). */
static void sem_defer(rlock_semaphore *sem, rlk_sem_req *q, int64_t n,
                      const unsigned char (*ids)[16])
{
    rlk_sem_pending *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return;
    }
    rlk_buf_init(&p->q.key); /* a copy: the buffer may point into its own struct */
    if (rlk_buf_append(&p->q.key, q->key.p, q->key.len) != RLOCK_OK) {
        free(p);
        return;
    }
    p->n = n;
    if (ids != NULL) {
        p->ids = malloc((size_t)n * sizeof(*p->ids));
        if (p->ids == NULL) {
            rlk_buf_free(&p->q.key);
            free(p);
            return;
        }
        memcpy(p->ids, ids, (size_t)n * sizeof(*p->ids));
    }
    p->until_ms = rlk_add_sat(rlk_now_ms(), rlk_sem_req_ttl(sem->client));
    sem_pending_push(sem, p);
}

/* One try at a deferred settlement (no resends: the caller's own call waits behind it); kept for
 * the next call if Redis is still out of reach and the request key may still be there. */
static void sem_settle_one(rlock_semaphore *sem, rlk_sem_pending *p)
{
    int s = sem_settle(sem, &p->q, p->n, 0, (const unsigned char(*)[16])p->ids, 1);
    if (s < 0 && rlk_now_ms() < p->until_ms) {
        sem_pending_push(sem, p);
        return;
    }
    if (s == 1) {
        rlk_log(sem->client, RLOCK_LOG_INFO,
                "semaphore '%s': gave back %lld permit(s) taken by an acquire whose reply was lost",
                sem->name, (long long)p->n);
    } else if (s < 0) {
        rlk_log(sem->client, RLOCK_LOG_WARN,
                "semaphore '%s': gave up settling an acquire whose reply was lost; %lld "
                "permit(s) may stay taken",
                sem->name, (long long)p->n);
    }
    rlk_sem_req_free(&p->q);
    free(p->ids);
    free(p);
}

/* Settles the acquire calls of the handle that were left unsettled (at the start of every call
 * on it, rlk_sem_check()). */
static void sem_settle_pending(rlock_semaphore *sem)
{
    if (!atomic_load(&sem->has_pending)) {
        return;
    }
    pthread_mutex_lock(&sem->mu);
    rlk_sem_pending *p = sem->pending;
    sem->pending = NULL;
    atomic_store(&sem->has_pending, 0);
    pthread_mutex_unlock(&sem->mu);
    while (p != NULL) {
        rlk_sem_pending *next = p->next;
        sem_settle_one(sem, p);
        p = next;
    }
}

/* Forgets them without settling (at free, and in the child of a fork()). No other thread may
 * use the handle. */
static void sem_drop_pending(rlock_semaphore *sem)
{
    rlk_sem_pending *p = sem->pending;
    sem->pending = NULL;
    atomic_store(&sem->has_pending, 0);
    while (p != NULL) {
        rlk_sem_pending *next = p->next;
        rlk_sem_req_free(&p->q);
        free(p->ids);
        free(p);
        p = next;
    }
}

/* Gives back permits that fewer replicas acknowledged than the master has, as lock_release.c gives
 * back such a grant: a failover to one of them would forget the acquire while the caller used the
 * permits. Best effort, and waiting for no replica (it would fall short the same way). */
static int sem_undo_unsynced(rlock_semaphore *sem, rlk_sem_req *q, int64_t n,
                             const unsigned char (*ids)[16])
{
    int acked = 0, k = 0;
    if (!rlk_sync_short(&acked, &k)) {
        return RLOCK_OK;
    }
    rlk_obs_replica_sync_failed(sem->client,
                                ids != NULL ? RLOCK_MK_SEMAPHORE_LEASED : RLOCK_MK_SEMAPHORE,
                                sem->name, NULL, RLOCK_EREPLICA);
    rlk_sync_suppress(1);
    (void)sem_settle(sem, q, n, 0, ids, 0);
    rlk_sync_suppress(0);
    return rlk_sync_error(acked, k, "semaphore", sem->name);
}

/* The end of an acquire call r (0 timed out, or an error) that lost a reply: an attempt may have
 * taken the permits unseen. They are kept and the call succeeds (1), or the call is cancelled
 * on Redis, so that no copy of an attempt still on its way takes any later; r stands then. If
 * Redis cannot be reached for this either, the permits may stay taken (a leased one until its
 * lease runs out), which is logged. */
static int sem_settle_lost(rlock_semaphore *sem, rlk_sem_req *q, int64_t n,
                           const unsigned char (*ids)[16], int r)
{
    char why[256];
    sem_detail(r, why, sizeof(why));
    int s = sem_settle(sem, q, n, 1, ids, 0);
    if (s == 2) {
        rlk_log(sem->client, RLOCK_LOG_INFO,
                "semaphore '%s': kept %lld permit(s) whose acquire reply was lost", sem->name,
                (long long)n);
        return 1;
    }
    if (s < 0) {
        rlk_log(sem->client, RLOCK_LOG_WARN,
                "semaphore '%s': an acquire whose reply was lost could not be settled; the "
                "handle's next call settles it: %s",
                sem->name, rlock_last_error());
        sem_defer(sem, q, n, ids);
    }
    if (r < 0) {
        rlk_err(r, "%s", why);
    }
    return r;
}

int rlk_sem_acquire(rlock_semaphore *sem, int64_t n, int64_t wait_ms, int64_t lease_ms,
                    const unsigned char (*ids)[16], const rlock_cancel *cancel)
{
    rlk_sem_req q;
    int r = rlk_sem_req_init(&q, sem->name, sem->name_len, 0);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_sem_try t = {sem, &q, n, lease_ms, ids};
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    rlk_sync_clear();
    r = rlk_wait_notified_cancel(sem->client, sem->channel.p, sem->channel.len, RLK_MSG_COUNT, wait,
                                 cancel, sem_try_once, &t);
    if (r == RLOCK_ECANCELED) {
        r = rlk_cancel_check(cancel, "semaphore", sem->name); /* the error names the semaphore */
    }
    /* A cancelled call is settled too: an attempt whose reply was lost may have taken the
     * permits, which are then kept and returned as RLOCK_OK rather than left taken unseen. */
    if (r != 1 && q.lost && r != RLOCK_ECLOSED) {
        rlk_sync_clear();
        r = sem_settle_lost(sem, &q, n, ids, r);
    }
    if (r == 1) {
        /* The last synced script of this thread is the attempt that took the permits. After a
         * settlement that kept them there is none (a settlement waits for no replica), so
         * permits kept that way are not checked. */
        int u = sem_undo_unsynced(sem, &q, n, ids);
        r = u ? u : r;
    }
    rlk_sem_req_free(&q);
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT,
                       "%lld permit(s) of semaphore '%s' not acquired within "
                       "%lld ms",
                       (long long)n, sem->name, (long long)wait_ms);
    }
    return r == 1 ? RLOCK_OK : r;
}

RLOCK_EXPORT int rlock_semaphore_acquire_ex(rlock_semaphore *sem, int64_t permits, int64_t wait_ms,
                                            rlock_cancel *cancel)
{
    if (sem == NULL) {
        return rlk_err(RLOCK_EINVAL, "semaphore must not be NULL");
    }
    /* Every call is observed once, but for bad input, which is no acquire (as for locks). */
    int observed = permits >= 1 && permits <= INT32_MAX && wait_ms >= 0;
    rlk_obs_wait w;
    if (observed) {
        rlk_obs_acquire_begin(sem->client, &w, RLOCK_MK_SEMAPHORE, sem->name, NULL);
    }
    int r = rlk_sem_check_cancel(sem, cancel);
    r = r ? r : check_permits(permits, 1, "permits");
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    r = r ? r : rlk_sem_acquire(sem, permits, wait_ms, 0, NULL, cancel);
    if (!observed) {
        return r;
    }
    if (r == RLOCK_OK) {
        /* The gauge counts permits: rlk_obs_acquire_end() adds the first. */
        rlk_obs_holds_add(sem->client, RLOCK_MK_SEMAPHORE, sem->name, permits - 1);
    }
    return rlk_obs_acquire_end(sem->client, &w, sem->name, NULL, r, 0, 1);
}

RLOCK_EXPORT int rlock_semaphore_acquire(rlock_semaphore *sem, int64_t permits, int64_t wait_ms)
{
    return rlock_semaphore_acquire_ex(sem, permits, wait_ms, NULL);
}

void rlk_sem_warn_unsynced(const rlock_semaphore *sem, int kind, int r, const char *what)
{
    int acked = 0, n = 0;
    if (r >= 0 && rlk_sync_short(&acked, &n)) {
        rlk_obs_replica_sync_failed(sem->client, kind, sem->name, NULL, RLOCK_EREPLICA);
        /* Returned on the master; a failover before the replicas learn it brings the permits
         * back as taken (a leased one until its lease runs out), which a retry cannot fix
         * without returning them twice, so the call still succeeds. */
        rlk_log(sem->client, RLOCK_LOG_WARN, "%s of semaphore '%s': %d of %d replicas acknowledged",
                what, sem->name, acked, n);
    }
}

void rlk_sem_release_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t permits,
                          rlk_args *keys, rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_init(args);
    rlk_args_addi(args, permits);
    rlk_args_addi(args, rlk_sem_req_ttl(sem->client));
}

RLOCK_EXPORT int rlock_semaphore_release(rlock_semaphore *sem, int64_t permits)
{
    int r = rlk_sem_check(sem);
    r = r ? r : check_permits(permits, 1, "permits");
    rlk_sem_req q;
    r = r ? r : rlk_sem_req_init(&q, sem->name, sem->name_len, 0);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_sem_release_args(sem, &q, permits, &keys, &args);
    redisReply *rep = NULL;
    rlk_sync_clear();
    r = rlk_sem_run(sem->client, &q, RLK_SCRIPT_SEM_RELEASE, &keys, &args, &rep, "release",
                    sem->name);
    long long v = 0;
    r = r ? r : int_reply(rep, &v, "sem_release");
    freeReplyObject(rep);
    rlk_sem_req_free(&q);
    rlk_sem_warn_unsynced(sem, RLOCK_MK_SEMAPHORE, r, "release");
    if (r == RLOCK_OK) {
        /* The end of a hold of permits (plain permits are nobody's: no hold time is known). */
        rlk_obs_holds_add(sem->client, RLOCK_MK_SEMAPHORE, sem->name, 1 - permits);
        rlk_obs_release(sem->client, RLOCK_MK_SEMAPHORE, sem->name, NULL, 0, 0);
    }
    return r;
}

void rlk_sem_keyed_args(const rlock_semaphore *sem, int script, const rlk_sem_req *q, int64_t arg,
                        rlk_args *keys, rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_init(args);
    if (script == RLK_SCRIPT_SEM_SET_PERMITS) {
        rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    }
    if (script != RLK_SCRIPT_SEM_DRAIN) {
        rlk_args_add(keys, sem->channel.p, sem->channel.len);
        rlk_args_addi(args, arg);
    }
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_addi(args, rlk_sem_req_ttl(sem->client));
}

/* Runs a count-changing script (rlk_sem_keyed_args()), resent after a lost reply and applied
 * once; its integer reply in *v. */
static int sem_keyed(rlock_semaphore *sem, int script, int64_t arg, long long *v, const char *what)
{
    rlk_sem_req q;
    int r = rlk_sem_req_init(&q, sem->name, sem->name_len, 0);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_sem_keyed_args(sem, script, &q, arg, &keys, &args);
    redisReply *rep = NULL;
    r = rlk_sem_run(sem->client, &q, script, &keys, &args, &rep, what, sem->name);
    r = r ? r : int_reply(rep, v, what);
    freeReplyObject(rep);
    rlk_sem_req_free(&q);
    return r;
}

RLOCK_EXPORT int64_t rlock_semaphore_drain(rlock_semaphore *sem)
{
    int r = rlk_sem_check(sem);
    long long v = 0;
    r = r ? r : sem_keyed(sem, RLK_SCRIPT_SEM_DRAIN, 0, &v, "drain");
    /* A count below 0 (a negative add) is set to 0 as by Redisson, but no permit was taken. */
    return r ? r : v < 0 ? 0 : v;
}

RLOCK_EXPORT int rlock_semaphore_set_permits(rlock_semaphore *sem, int64_t permits)
{
    int r = rlk_sem_check(sem);
    r = r ? r : check_permits(permits, 0, "permits");
    long long v = 0;
    r = r ? r : sem_keyed(sem, RLK_SCRIPT_SEM_SET_PERMITS, permits, &v, "set permits");
    return r;
}

RLOCK_EXPORT int rlock_semaphore_release_if_exists(rlock_semaphore *sem, int64_t permits)
{
    int r = rlk_sem_check(sem);
    r = r ? r : check_permits(permits, 1, "permits");
    long long v = 0;
    rlk_sync_clear();
    r = r ? r : sem_keyed(sem, RLK_SCRIPT_SEM_RELEASE_IF_EXISTS, permits, &v, "release if exists");
    rlk_sem_warn_unsynced(sem, RLOCK_MK_SEMAPHORE, r, "release");
    if (r == RLOCK_OK && v == 1) {
        rlk_obs_holds_add(sem->client, RLOCK_MK_SEMAPHORE, sem->name, 1 - permits);
        rlk_obs_release(sem->client, RLOCK_MK_SEMAPHORE, sem->name, NULL, 0, 0);
    }
    return r ? r : (int)v;
}

void rlk_sem_permits_args(const rlock_semaphore *sem, const char *mode, rlk_args *keys,
                          rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_init(args);
    rlk_args_addi(args, rlk_epoch_ms());
    rlk_args_adds(args, mode);
}

/* Runs sem_permits.lua in mode ('total' or 'leased'): its count, or a negative error. */
static int64_t sem_count_permits(rlock_semaphore *sem, const char *mode)
{
    int r = rlk_sem_check(sem);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_sem_permits_args(sem, mode, &keys, &args);
    redisReply *rep = NULL;
    r = rlk_script(sem->client, RLK_SCRIPT_SEM_PERMITS, RLK_IDEMPOTENT, &keys, &args, &rep);
    long long v = 0;
    r = r ? r : int_reply(rep, &v, "sem_permits");
    freeReplyObject(rep);
    return r ? r : v < 0 ? 0 : v;
}

RLOCK_EXPORT int64_t rlock_semaphore_permits(rlock_semaphore *sem)
{
    return sem_count_permits(sem, "total");
}

RLOCK_EXPORT int64_t rlock_semaphore_acquired(rlock_semaphore *sem)
{
    return sem_count_permits(sem, "leased");
}

RLOCK_EXPORT int rlock_semaphore_try_set_permits_ttl(rlock_semaphore *sem, int64_t permits,
                                                     int64_t ttl_ms)
{
    int r = rlk_sem_check(sem);
    r = r ? r : check_permits(permits, 0, "permits");
    if (r == RLOCK_OK && (ttl_ms <= 0 || ttl_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "ttl_ms must be in 1 .. %lld, got %lld",
                    (long long)RLOCK_MAX_DURATION_MS, (long long)ttl_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_sem_call_args(sem, RLK_SCRIPT_SEM_TRY_SET, permits, &keys, &args);
    rlk_args_addi(&args, ttl_ms);
    redisReply *rep = NULL;
    r = rlk_script(sem->client, RLK_SCRIPT_SEM_TRY_SET, RLK_IDEMPOTENT, &keys, &args, &rep);
    long long v = 0;
    r = r ? r : int_reply(rep, &v, "sem_try_set");
    freeReplyObject(rep);
    return r ? r : (int)v;
}
