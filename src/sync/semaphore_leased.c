/*
 * Leased permits (Redisson RPermitExpirableSemaphore data): a permit is a 16-byte random id in
 * the zset {name}:timeout scored with its expiry in epoch ms. With lease_ms < 0 the permit is
 * renewed by the client's watchdog (renew class below, lua/sem_renew_leased.lua), so a crashed
 * holder's permit comes back within watchdog_timeout_ms and a live holder keeps it.
 */
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "error.h"
#include "pool.h"
#include "replica.h"
#include "scripts.h"
#include "semaphore.h"
#include "semaphore_leased.h"

#define RLK_PERMIT_OF(e) ((rlk_permit *)((char *)(e)-offsetof(rlk_permit, wd)))

static int permit_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    rlk_permit *p = RLK_PERMIT_OF(e);
    int r = rlk_buf_append(key, p->sem->timeout.p, p->sem->timeout.len);
    return r ? r : rlk_buf_append(field, p->id, sizeof(p->id));
}

static void permit_lost(rlk_wd_entry *e)
{
    rlk_permit *p = RLK_PERMIT_OF(e);
    atomic_store(&p->lost, 1);
    rlock_client *c = p->sem->client;
    char hex[RLOCK_PERMIT_ID_LEN + 1];
    rlk_sem_hex(p->id, hex);
    rlk_obs_lost(c, RLOCK_MK_SEMAPHORE_LEASED, p->sem->name, hex, p->acquired_ns, 0);
    rlk_log(c, RLOCK_LOG_WARN, "a leased permit of semaphore '%s' was lost", p->sem->name);
    if (c->opts.on_lost != NULL) {
        c->opts.on_lost(p->sem->name, c->opts.user_data);
    }
}

static const rlk_renew_class permit_renew = {
    .script = RLK_SCRIPT_SEM_RENEW_LEASED,
    .describe = permit_describe,
    .lost = permit_lost,
};

static int nibble(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    return ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

int rlk_sem_unhex(const char *text, unsigned char id[16])
{
    if (text == NULL || strnlen(text, RLOCK_PERMIT_ID_LEN + 1) != RLOCK_PERMIT_ID_LEN) {
        return rlk_err(RLOCK_EINVAL, "a permit id must be %d hex digits", RLOCK_PERMIT_ID_LEN);
    }
    for (size_t i = 0; i < 16; i++) {
        int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return rlk_err(RLOCK_EINVAL, "a permit id must be %d hex digits", RLOCK_PERMIT_ID_LEN);
        }
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    return RLOCK_OK;
}

/* Records a granted permit; with the watchdog, registers its renewals. On failure to record,
 * the permit is returned so that it cannot leak. */
static int permit_record(rlock_semaphore *sem, const unsigned char id[16], int watched)
{
    rlk_permit *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return RLOCK_ENOMEM;
    }
    p->sem = sem;
    p->acquired_ns = rlk_obs_now_ns();
    memcpy(p->id, id, 16);
    rlk_wd_entry_init(&p->wd, &permit_renew);
    if (watched) {
        int r = rlk_wd_add(sem->client->watchdog, &p->wd, sem->client->opts.watchdog_timeout_ms);
        if (r != RLOCK_OK) {
            free(p);
            return r;
        }
        p->watched = 1;
    }
    pthread_mutex_lock(&sem->mu);
    p->next = sem->permits;
    sem->permits = p;
    pthread_mutex_unlock(&sem->mu);
    return RLOCK_OK;
}

/* Stops the renewals of p (a freed client's watchdog is gone, and renews nothing). */
static void permit_unwatch(rlock_semaphore *sem, rlk_permit *p)
{
    if (p->watched && !atomic_load(&sem->client->closed)) {
        rlk_wd_cancel(sem->client->watchdog, &p->wd);
    }
}

/* Takes the handle's record of id out of its list (NULL if it has none). */
static rlk_permit *permit_take(rlock_semaphore *sem, const unsigned char id[16])
{
    pthread_mutex_lock(&sem->mu);
    rlk_permit **pp = &sem->permits;
    while (*pp != NULL && memcmp((*pp)->id, id, 16) != 0) {
        pp = &(*pp)->next;
    }
    rlk_permit *p = *pp;
    if (p != NULL) {
        *pp = p->next;
    }
    pthread_mutex_unlock(&sem->mu);
    return p;
}

/* A record taken out of the handle: the end of its hold, released (a release call, whatever
 * Redis answers: the handle forgets the permit) or forgotten (the handle freed: the gauge only),
 * unless the watchdog reported it lost already. */
static void permit_end(rlock_semaphore *sem, const rlk_permit *p, int released)
{
    if (atomic_load(&p->lost)) {
        return;
    }
    if (!released) {
        rlk_obs_forget(sem->client, RLOCK_MK_SEMAPHORE_LEASED, sem->name);
        return;
    }
    char hex[RLOCK_PERMIT_ID_LEN + 1];
    rlk_sem_hex(p->id, hex);
    rlk_obs_release(sem->client, RLOCK_MK_SEMAPHORE_LEASED, sem->name, hex, p->acquired_ns, 0);
}

/* Returns the first n permits of ids after a failure to record them (best effort). */
static void permits_give_back(rlock_semaphore *sem, const unsigned char (*ids)[16], int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        long long v = 0;
        rlk_permit *p = permit_take(sem, ids[i]);
        if (p != NULL) {
            permit_unwatch(sem, p);
            free(p);
        }
        rlk_sem_release_id(sem, ids[i], &v);
    }
}

/* rlock_semaphore_acquire_leased_n() whose wait cancel (NULL: none) ends. */
static int leased_n(rlock_semaphore *sem, int64_t permits, int64_t wait_ms, int64_t lease_ms,
                    char (*permit_ids)[RLOCK_PERMIT_ID_LEN + 1], const rlock_cancel *cancel)
{
    int r = rlk_sem_check_cancel(sem, cancel);
    if (r == RLOCK_OK && (lease_ms == 0 || lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "lease_ms must be > 0 or < 0 and at most %lld, got %lld",
                    (long long)RLOCK_MAX_DURATION_MS, (long long)lease_ms);
    }
    if (r == RLOCK_OK && (permits < 1 || permits > RLOCK_PERMIT_IDS_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "permits must be in 1 .. %d, got %lld", RLOCK_PERMIT_IDS_MAX,
                    (long long)permits);
    }
    if (r == RLOCK_OK && (wait_ms < 0 || permit_ids == NULL)) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0 and permit_ids not NULL");
    }
    if (r != RLOCK_OK || permit_ids == NULL) {
        return r;
    }
    unsigned char ids[RLOCK_PERMIT_IDS_MAX][16];
    for (int64_t i = 0; i < permits; i++) {
        uuid_generate_random(ids[i]); /* 16 random bytes, as Redisson's generateIdArray */
    }
    r = rlk_sem_acquire(sem, permits, wait_ms, lease_ms, (const unsigned char(*)[16])ids, cancel);
    for (int64_t i = 0; r == RLOCK_OK && i < permits; i++) {
        r = permit_record(sem, ids[i], lease_ms < 0);
        if (r != RLOCK_OK) {
            permits_give_back(sem, (const unsigned char(*)[16])ids, permits);
            return rlk_err(r, "semaphore '%s': cannot record the leased permits; returned them",
                           sem->name);
        }
    }
    for (int64_t i = 0; r == RLOCK_OK && i < permits; i++) {
        rlk_sem_hex(ids[i], permit_ids[i]);
    }
    return r;
}

/* leased_n() observed once as an acquire of the semaphore's leased permits (bad input, which is
 * no acquire, is not); each permit counts as a hold. */
static int rlk_sem_leased_n(rlock_semaphore *sem, int64_t permits, int64_t wait_ms,
                            int64_t lease_ms, char (*permit_ids)[RLOCK_PERMIT_ID_LEN + 1],
                            const rlock_cancel *cancel)
{
    if (sem == NULL) {
        return rlk_err(RLOCK_EINVAL, "semaphore must not be NULL");
    }
    int observed = lease_ms != 0 && lease_ms <= RLOCK_MAX_DURATION_MS && permits >= 1 &&
                   permits <= RLOCK_PERMIT_IDS_MAX && wait_ms >= 0 && permit_ids != NULL;
    if (!observed) {
        return leased_n(sem, permits, wait_ms, lease_ms, permit_ids, cancel);
    }
    rlk_obs_wait w;
    rlk_obs_acquire_begin(sem->client, &w, RLOCK_MK_SEMAPHORE_LEASED, sem->name, NULL);
    int r = leased_n(sem, permits, wait_ms, lease_ms, permit_ids, cancel);
    if (r == RLOCK_OK) {
        rlk_obs_holds_add(sem->client, RLOCK_MK_SEMAPHORE_LEASED, sem->name, permits - 1);
    }
    return rlk_obs_acquire_end(sem->client, &w, sem->name, r == RLOCK_OK ? permit_ids[0] : NULL, r,
                               0, 1);
}

RLOCK_EXPORT int rlock_semaphore_acquire_leased_n(rlock_semaphore *sem, int64_t permits,
                                                  int64_t wait_ms, int64_t lease_ms,
                                                  char (*permit_ids)[RLOCK_PERMIT_ID_LEN + 1])
{
    return rlk_sem_leased_n(sem, permits, wait_ms, lease_ms, permit_ids, NULL);
}

RLOCK_EXPORT int rlock_semaphore_acquire_leased_ex(rlock_semaphore *sem, int64_t wait_ms,
                                                   int64_t lease_ms, rlock_cancel *cancel,
                                                   char permit_id[RLOCK_PERMIT_ID_LEN + 1])
{
    if (permit_id == NULL) {
        return rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0 and permit_id not NULL");
    }
    return rlk_sem_leased_n(sem, 1, wait_ms, lease_ms, (char(*)[RLOCK_PERMIT_ID_LEN + 1]) permit_id,
                            cancel);
}

RLOCK_EXPORT int rlock_semaphore_acquire_leased(rlock_semaphore *sem, int64_t wait_ms,
                                                int64_t lease_ms,
                                                char permit_id[RLOCK_PERMIT_ID_LEN + 1])
{
    return rlock_semaphore_acquire_leased_ex(sem, wait_ms, lease_ms, NULL, permit_id);
}

RLOCK_EXPORT int rlock_semaphore_release_leased(rlock_semaphore *sem, const char *permit_id)
{
    unsigned char id[16];
    int r = rlk_sem_check(sem);
    r = r ? r : rlk_sem_unhex(permit_id, id);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_permit *p = permit_take(sem, id);
    int lost = 0;
    if (p != NULL) {
        /* Stop renewing before the release reaches Redis: a renewal after it would find the
         * permit gone and report a spurious loss. */
        permit_unwatch(sem, p);
        lost = atomic_load(&p->lost);
        /* The record is gone whatever the release answers: so is the hold it stood for. */
        permit_end(sem, p, 1);
        free(p);
    }
    if (lost) {
        return rlk_err(RLOCK_ELOST,
                       "the leased permit %s of semaphore '%s' was lost before "
                       "release",
                       permit_id, sem->name);
    }
    long long v = 0;
    rlk_sync_clear();
    r = rlk_sem_release_id(sem, id, &v);
    rlk_sem_warn_unsynced(sem, RLOCK_MK_SEMAPHORE_LEASED, r, "leased release");
    if (r == RLOCK_OK && v != 1) {
        r = rlk_err(RLOCK_ENOTOWNER, "no leased permit %s is held on semaphore '%s'%s", permit_id,
                    sem->name, v == 0 ? " (its lease had run out)" : "");
    }
    return r;
}

void rlk_sem_forget_permits(rlock_semaphore *sem)
{
    rlk_sem_refresh(sem);
    pthread_mutex_lock(&sem->mu);
    rlk_permit *p = sem->permits;
    sem->permits = NULL;
    pthread_mutex_unlock(&sem->mu);
    while (p != NULL) {
        rlk_permit *next = p->next;
        permit_unwatch(sem, p);
        permit_end(sem, p, 0);
        free(p);
        p = next;
    }
}

void rlk_sem_lease_args(const rlock_semaphore *sem, int script, const unsigned char id[16],
                        int64_t lease_ms, rlk_args *keys, rlk_args *args)
{
    int64_t now = rlk_epoch_ms();
    rlk_args_init(keys);
    rlk_args_add(keys, sem->name, sem->name_len);
    rlk_args_add(keys, sem->timeout.p, sem->timeout.len);
    rlk_args_add(keys, sem->channel.p, sem->channel.len);
    rlk_args_init(args);
    rlk_args_add(args, (const char *)id, 16);
    if (script == RLK_SCRIPT_SEM_UPDATE_LEASE) {
        rlk_args_addi(args, rlk_add_sat(now, lease_ms));
        rlk_args_addi(args, now);
    } else {
        rlk_args_addi(args, now);
        rlk_args_addi(args, RLK_SEM_NO_EXPIRY);
    }
}

/* Stops this handle's watchdog renewals of id, which would overwrite a lease the caller set. */
static void permit_stop_renewing(rlock_semaphore *sem, const unsigned char id[16])
{
    rlk_permit *p = permit_take(sem, id);
    if (p == NULL) {
        return;
    }
    permit_unwatch(sem, p);
    p->watched = 0;
    pthread_mutex_lock(&sem->mu);
    p->next = sem->permits;
    sem->permits = p;
    pthread_mutex_unlock(&sem->mu);
}

RLOCK_EXPORT int rlock_semaphore_update_lease(rlock_semaphore *sem, const char *permit_id,
                                              int64_t lease_ms)
{
    unsigned char id[16];
    int r = rlk_sem_check(sem);
    r = r ? r : rlk_sem_unhex(permit_id, id);
    if (r == RLOCK_OK && (lease_ms <= 0 || lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL, "lease_ms must be in 1 .. %lld, got %lld",
                    (long long)RLOCK_MAX_DURATION_MS, (long long)lease_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    permit_stop_renewing(sem, id);
    rlk_args keys, args;
    rlk_sem_lease_args(sem, RLK_SCRIPT_SEM_UPDATE_LEASE, id, lease_ms, &keys, &args);
    redisReply *rep = NULL;
    r = rlk_script(sem->client, RLK_SCRIPT_SEM_UPDATE_LEASE, RLK_IDEMPOTENT, &keys, &args, &rep);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "sem_update_lease: expected an integer reply");
    }
    if (r == RLOCK_OK && rep->integer != 1) {
        r = rlk_err(RLOCK_ENOTOWNER, "no leased permit %s is held on semaphore '%s'", permit_id,
                    sem->name);
    }
    freeReplyObject(rep);
    return r;
}

RLOCK_EXPORT int rlock_semaphore_release_leased_n(rlock_semaphore *sem,
                                                  const char *const *permit_ids, size_t count)
{
    int r = rlk_sem_check(sem);
    if (r != RLOCK_OK) {
        return r;
    }
    if (permit_ids == NULL || count < 1 || count > RLOCK_PERMIT_IDS_MAX) {
        return rlk_err(RLOCK_EINVAL, "permit_ids must hold 1 .. %d ids, got %zu",
                       RLOCK_PERMIT_IDS_MAX, permit_ids == NULL ? (size_t)0 : count);
    }
    unsigned char id[16];
    for (size_t i = 0; r == RLOCK_OK && i < count; i++) {
        r = rlk_sem_unhex(permit_ids[i], id); /* all ids checked before any is released */
    }
    int released = 0;
    for (size_t i = 0; r == RLOCK_OK && i < count; i++) {
        int one = rlock_semaphore_release_leased(sem, permit_ids[i]);
        if (one == RLOCK_OK) {
            released++;
        } else if (one != RLOCK_ENOTOWNER && one != RLOCK_ELOST) {
            r = one;
        }
    }
    return r ? r : released;
}

RLOCK_EXPORT int rlock_semaphore_remaining_lease_ms(rlock_semaphore *sem, const char *permit_id,
                                                    int64_t *lease_ms)
{
    unsigned char id[16];
    int r = rlk_sem_check(sem);
    r = r ? r : rlk_sem_unhex(permit_id, id);
    if (r != RLOCK_OK) {
        return r;
    }
    if (lease_ms == NULL) {
        return rlk_err(RLOCK_EINVAL, "lease_ms must not be NULL");
    }
    rlk_args keys, args;
    rlk_sem_lease_args(sem, RLK_SCRIPT_SEM_LEASE_LEFT, id, 0, &keys, &args);
    redisReply *rep = NULL;
    r = rlk_script(sem->client, RLK_SCRIPT_SEM_LEASE_LEFT, RLK_IDEMPOTENT, &keys, &args, &rep);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "sem_lease_left: expected an integer reply");
    }
    if (r == RLOCK_OK && rep->integer == -2) {
        r = rlk_err(RLOCK_ENOTOWNER, "no leased permit %s is held on semaphore '%s'", permit_id,
                    sem->name);
    }
    if (r == RLOCK_OK) {
        *lease_ms = rep->integer;
    }
    freeReplyObject(rep);
    return r;
}
