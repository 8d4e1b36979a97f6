/*
 * Semaphore handles, private to semaphore.c (plain permits, setup, queries) and
 * semaphore_leased.c (leased permits and their watchdog renewals).
 */
#ifndef RLK_SEMAPHORE_H
#define RLK_SEMAPHORE_H

#include <pthread.h>
#include <stdatomic.h>

#include "client.h"
#include "watchdog.h"

/* Score of a leased permit without expiry (Redisson's NON_EXPIRABLE). */
#define RLK_SEM_NO_EXPIRY INT64_C(922337203685477)

/* One leased permit taken through a handle (kept so that release can stop its renewals and
 * so that a loss can be reported). Linked in the handle's list under its mutex. */
typedef struct rlk_permit {
    struct rlk_permit *next;
    rlock_semaphore *sem;
    unsigned char id[16];
    int watched;     /* registered with the watchdog */
    atomic_int lost; /* set by the watchdog: the lease ran out while held */
    rlk_wd_entry wd;
} rlk_permit;

struct rlock_semaphore {
    rlock_client *client;
    pthread_mutex_t mu; /* guards permits */
    rlk_permit *permits;
    atomic_uint gen; /* the fork generation the permits belong to (rlk_sem_refresh) */
    rlk_buf channel; /* redisson_sc:{name} */
    rlk_buf timeout; /* {name}:timeout */
    size_t name_len;
    char name[];
};

/* Checks sem and its client: RLOCK_OK, RLOCK_EINVAL (NULL), RLOCK_ECLOSED. */
int rlk_sem_check(rlock_semaphore *sem);

/* The caller's wall clock in epoch ms (Redisson's lease scores are client epoch times). */
int64_t rlk_epoch_ms(void);

/* One acquire attempt of n permits, leased with ids (count n) or plain (ids NULL): 1 acquired,
 * 0 not (*hint_ms = ms until the earliest lease runs out, or -1), or a negative error. */
int rlk_sem_attempt(rlock_semaphore *sem, int64_t n, int64_t expiry, const unsigned char (*ids)[16],
                    int64_t *hint_ms);

/* Returns the leased permit id on Redis (sem_release_leased.lua): *v is 1 released, 0 released
 * after its lease ran out, -1 no such permit; or a negative error. */
int rlk_sem_release_id(rlock_semaphore *sem, const unsigned char id[16], long long *v);

/* After a release (r its result): logs at WARN when fewer replicas acknowledged it than asked. */
void rlk_sem_warn_unsynced(const rlock_semaphore *sem, int r, const char *what);

/* Acquires by waiting on the channel: the attempt above in the shared notification wait. With
 * replica sync, permits that fewer replicas acknowledged are given back and the call returns
 * RLOCK_EREPLICA. */
int rlk_sem_acquire(rlock_semaphore *sem, int64_t n, int64_t wait_ms, int64_t lease_ms,
                    const unsigned char (*ids)[16]);

/* In the child of a fork(), forgets the records of the leased permits the handle inherited: the
 * permits are the parent's, renewed by the parent's watchdog, so the child neither renews nor
 * reports them. No-op in the process that recorded them. */
void rlk_sem_refresh(rlock_semaphore *sem);

/* Stops the renewals of every leased permit of the handle (at free). */
void rlk_sem_forget_permits(rlock_semaphore *sem);

#endif
