/*
 * A waiter's liveness heartbeat, shared by the lock types whose waiters are recorded in Redis
 * while they wait: fair-lock waiters (redisson_lock_timeout:{name}) and waiting writers of a
 * writer-preferring read-write lock (rlock_rwlock_writers:{name}). While registered with the
 * client's watchdog, the type's heartbeat script refreshes the waiter's server-clock deadline, so
 * a waiter whose process died leaves within waiter_timeout_ms.
 */
#ifndef RLK_LOCK_HEARTBEAT_H
#define RLK_LOCK_HEARTBEAT_H

#include "lock.h"

typedef struct rlk_waiter_hb {
    rlk_wd_entry wd;
    char member[RLK_OWNER_MAX]; /* the waiter's member in the type's zset */
    size_t member_len;
    /* A copy of the lock's name: a heartbeat the watchdog finishes after its waiter returned
     * (rlk_waiter_hb_stop) must not read the handle, which the caller may have freed. */
    size_t name_len;
    char name[];
} rlk_waiter_hb;

/* Starts the heartbeat of a's wait, renewed by cls (whose describe, lost and release must be
 * rlk_waiter_hb_describe, rlk_waiter_hb_lost and rlk_waiter_hb_release), for member. Sets *out; on
 * failure returns a negative error with *out NULL. */
int rlk_waiter_hb_start(rlk_acq *a, const rlk_renew_class *cls, const char *member, size_t len,
                        rlk_waiter_hb **out);
/* Registers w again after the watchdog judged it lost or the waiter's entry had gone. */
int rlk_waiter_hb_restart(rlk_acq *a, rlk_waiter_hb *w);
/* Stops and frees *w (may be NULL); when it returns no heartbeat of it is in flight, so the
 * waiter's entry can be removed without being put back; unless the calling thread's command
 * bound (rlk_pool_bound) passed while one was: the watchdog then frees *w after it. */
void rlk_waiter_hb_stop(rlk_acq *a, rlk_waiter_hb **w);

/* The renew-class pieces: key = the lock name, field = the member (the scripts derive the zset
 * from the lock name, as a batch gives one key per entry); a lost heartbeat needs no action. */
int rlk_waiter_hb_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field);
void rlk_waiter_hb_lost(rlk_wd_entry *e);
/* The class's release: frees a heartbeat the stop left to the watchdog. */
void rlk_waiter_hb_release(rlk_wd_entry *e);

#endif
