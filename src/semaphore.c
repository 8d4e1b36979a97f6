/*
 * Semaphores: handles, setup, queries and plain permits (Redisson RSemaphore data). Leased
 * permits are in semaphore_leased.c. Waiting is the shared notification wait (waiter.c) on
 * redisson_sc:{name} in counting mode: a message N gives at most N local waiters a re-attempt.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"
#include "pubsub.h"
#include "replica.h"
#include "scripts.h"
#include "semaphore.h"
#include "waiter.h"

int64_t rlk_epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rlk_sem_check(rlock_semaphore *sem)
{
    if (sem == NULL) {
        return rlk_err(RLOCK_EINVAL, "semaphore must not be NULL");
    }
    int r = rlk_client_enter(sem->client);
    if (r == RLOCK_OK) {
        rlk_sem_refresh(sem);
    }
    return r;
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
    rlk_buf_free(&sem->channel);
    rlk_buf_free(&sem->timeout);
    pthread_mutex_destroy(&sem->mu);
    rlk_client_unref(sem->client);
    free(sem);
}

static int rlk_int_reply(const redisReply *r, long long *v, const char *what)
{
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_EPROTO, "%s: expected an integer reply, got type %d", what,
                   r ? r->type : -1);
}

/* Runs a script on the semaphore's keys [name, second] with one integer argument and returns
 * its integer reply in *v. */
static int rlk_sem_call(rlock_semaphore *sem, int script, int flags, const rlk_buf *second,
                        int64_t arg, long long *v, const char *what)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, sem->name, sem->name_len);
    rlk_args_add(&keys, second->p, second->len);
    if (script == RLK_SCRIPT_SEM_AVAILABLE) {
        rlk_args_add(&keys, sem->channel.p, sem->channel.len);
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, arg);
    redisReply *rep = NULL;
    int r = rlk_script(sem->client, script, flags, &keys, &args, &rep);
    if (r == RLOCK_OK) {
        r = rlk_int_reply(rep, v, what);
    }
    freeReplyObject(rep);
    return r;
}

/* Permit counts are Redis integers; bounding them to 2^31-1 keeps every sum of a count and a
 * delta far inside Lua's exact range of doubles. */
static int rlk_check_permits(int64_t n, int64_t min, const char *what)
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
    r = r ? r : rlk_check_permits(permits, 0, "permits");
    long long v = 0;
    r = r ? r
          : rlk_sem_call(sem, RLK_SCRIPT_SEM_TRY_SET, RLK_IDEMPOTENT, &sem->channel, permits, &v,
                         "sem_try_set");
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
    return r ? r : rlk_sem_call(sem, RLK_SCRIPT_SEM_ADD, 0, &sem->channel, delta, &v, "sem_add");
}

RLOCK_EXPORT int64_t rlock_semaphore_available(rlock_semaphore *sem)
{
    int r = rlk_sem_check(sem);
    long long v = 0;
    r = r ? r
          : rlk_sem_call(sem, RLK_SCRIPT_SEM_AVAILABLE, RLK_IDEMPOTENT, &sem->timeout,
                         rlk_epoch_ms(), &v, "sem_available");
    return r ? r : v < 0 ? 0 : v;
}

int rlk_sem_attempt(rlock_semaphore *sem, int64_t n, int64_t expiry, const unsigned char (*ids)[16],
                    int64_t *hint_ms)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, sem->name, sem->name_len);
    rlk_args_add(&keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(&keys, sem->channel.p, sem->channel.len);
    rlk_args_init(&args);
    rlk_args_addi(&args, n);
    rlk_args_addi(&args, rlk_epoch_ms());
    rlk_args_addi(&args, expiry);
    for (int64_t i = 0; ids != NULL && i < n; i++) {
        rlk_args_add(&args, (const char *)ids[i], 16);
    }
    redisReply *rep = NULL;
    int r = rlk_script(sem->client, RLK_SCRIPT_SEM_ACQUIRE, 0, &keys, &args, &rep);
    if (r != RLOCK_OK) {
        return r;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return rlk_err(RLOCK_EPROTO, "sem_acquire on '%s': unexpected reply shape", sem->name);
    }
    r = rep->element[0]->integer == 1;
    *hint_ms = r ? -1 : rep->element[1]->integer;
    freeReplyObject(rep);
    return r;
}

typedef struct rlk_sem_try {
    rlock_semaphore *sem;
    int64_t n;
    int64_t lease_ms; /* > 0 lease, < 0 watchdog lease, 0 plain */
    const unsigned char (*ids)[16];
} rlk_sem_try;

static int rlk_sem_try_once(void *arg, int64_t *hint_ms)
{
    rlk_sem_try *t = arg;
    int64_t expiry = 0;
    if (t->ids != NULL) {
        int64_t lease = t->lease_ms > 0 ? t->lease_ms : t->sem->client->opts.watchdog_timeout_ms;
        expiry = rlk_add_sat(rlk_epoch_ms(), lease);
    }
    return rlk_sem_attempt(t->sem, t->n, expiry, t->ids, hint_ms);
}

/* Returns the permit on Redis: 1 released, 0 released after its lease ran out, -1 no such
 * permit, or a negative error. */
int rlk_sem_release_id(rlock_semaphore *sem, const unsigned char id[16], long long *v)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, sem->name, sem->name_len);
    rlk_args_add(&keys, sem->channel.p, sem->channel.len);
    rlk_args_add(&keys, sem->timeout.p, sem->timeout.len);
    rlk_args_init(&args);
    rlk_args_add(&args, (const char *)id, 16);
    rlk_args_addi(&args, rlk_epoch_ms());
    redisReply *rep = NULL;
    int r = rlk_script(sem->client, RLK_SCRIPT_SEM_RELEASE_LEASED, 0, &keys, &args, &rep);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "sem_release_leased: expected an integer reply");
    }
    if (r == RLOCK_OK) {
        *v = rep->integer;
    }
    freeReplyObject(rep);
    return r;
}

/* Gives back permits that fewer replicas acknowledged than the master has, as lock.c gives
 * back such a grant: a failover to one of them would forget the acquire while the caller used the
 * permits. Best effort, and waiting for no replica (it would fall short the same way). */
static int rlk_sem_undo_unsynced(rlock_semaphore *sem, int64_t n, const unsigned char (*ids)[16])
{
    int acked = 0, k = 0;
    if (!rlk_sync_short(&acked, &k)) {
        return RLOCK_OK;
    }
    rlk_sync_suppress(1);
    long long v = 0;
    if (ids == NULL) {
        (void)rlk_sem_call(sem, RLK_SCRIPT_SEM_RELEASE, 0, &sem->channel, n, &v, "sem_release");
    }
    for (int64_t i = 0; ids != NULL && i < n; i++) {
        (void)rlk_sem_release_id(sem, ids[i], &v);
    }
    rlk_sync_suppress(0);
    return rlk_sync_error(acked, k, "semaphore", sem->name);
}

int rlk_sem_acquire(rlock_semaphore *sem, int64_t n, int64_t wait_ms, int64_t lease_ms,
                    const unsigned char (*ids)[16])
{
    rlk_sem_try t = {sem, n, lease_ms, ids};
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    rlk_sync_clear();
    int r = rlk_wait_notified(sem->client, sem->channel.p, sem->channel.len, RLK_MSG_COUNT, wait,
                              rlk_sem_try_once, &t);
    if (r == 1) {
        /* The last synced script of this thread is the acquire that succeeded. */
        int u = rlk_sem_undo_unsynced(sem, n, ids);
        r = u ? u : r;
    }
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT,
                       "%lld permit(s) of semaphore '%s' not acquired within "
                       "%lld ms",
                       (long long)n, sem->name, (long long)wait_ms);
    }
    return r == 1 ? RLOCK_OK : r;
}

RLOCK_EXPORT int rlock_semaphore_acquire(rlock_semaphore *sem, int64_t permits, int64_t wait_ms)
{
    int r = rlk_sem_check(sem);
    r = r ? r : rlk_check_permits(permits, 1, "permits");
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    return r ? r : rlk_sem_acquire(sem, permits, wait_ms, 0, NULL);
}

void rlk_sem_warn_unsynced(const rlock_semaphore *sem, int r, const char *what)
{
    int acked = 0, n = 0;
    if (r >= 0 && rlk_sync_short(&acked, &n)) {
        /* Returned on the master; a failover before the replicas learn it brings the permits
         * back as taken (a leased one until its lease runs out), which a retry cannot fix
         * without returning them twice, so the call still succeeds. */
        rlk_log(sem->client, RLOCK_LOG_WARN, "%s of semaphore '%s': %d of %d replicas acknowledged",
                what, sem->name, acked, n);
    }
}

RLOCK_EXPORT int rlock_semaphore_release(rlock_semaphore *sem, int64_t permits)
{
    int r = rlk_sem_check(sem);
    r = r ? r : rlk_check_permits(permits, 1, "permits");
    long long v = 0;
    rlk_sync_clear();
    r = r ? r
          : rlk_sem_call(sem, RLK_SCRIPT_SEM_RELEASE, 0, &sem->channel, permits, &v, "sem_release");
    rlk_sem_warn_unsynced(sem, r, "release");
    return r;
}
