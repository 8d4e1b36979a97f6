/*
 * A lock waiter's loop and the grants made to it (lock_wait.c).
 */
#ifndef RLK_LOCK_WAIT_H
#define RLK_LOCK_WAIT_H

#include "lock.h"

/* The TTL a release that grants the lock to this waiter gives it (registered by the waiter's
 * attempt): min(lease, waiter_timeout_ms), so that a waiter that died just before its grant
 * stalls the lock no longer than a dead fair waiter stalls the queue. A longer lease is renewed
 * soon after the grant (within a third of the grant TTL): by the watchdog (watchdog holds), or by
 * a one-shot renewal (explicit leases). 0 for a single attempt (it never waits). */
int64_t rlk_grant_ttl(const rlk_acq *a);
/* 1 if c takes part in direct grants: as a waiter that registers a grant TTL, and as a releaser
 * that passes the grant keys. Every client does. A client that syncs to replicas (replica_sync)
 * does not believe a grant's message, which a release publishes before its WAIT: the waiter
 * confirms the grant by an attempt with its own WAIT behind it (lock_wait.c), so it holds the
 * lock only once the replicas acknowledged the grant, and gives back a grant they did not. */
int rlk_grants_on(const rlock_client *c);
/* How waits for a lock ended in this process, for tests and benchmarks: a grant's message
 * believed (no replica sync), a grant confirmed by an attempt whose replicas acknowledged it, a
 * win by an attempt after a wake-up, and grants or attempts given back because fewer replicas
 * acknowledged them than the master has (any lock call, not only waits). */
typedef struct rlk_grant_stats {
    uint64_t believed, confirmed, by_attempt, undone;
} rlk_grant_stats;
void rlk_grant_stats_get(rlk_grant_stats *out);
/* A give-up script's reply (lock_waiter_leave.lua, fair_leave.lua): {2, token} when a release
 * granted the lock to the waiter before it left: 1, with a->token and a->granted_ttl set; else 0
 * (an integer: it left, or was not waiting). */
int rlk_leave_granted(rlk_acq *a, const redisReply *r);
/* A new id from a process-wide sequence (lock_wait.c): each lock call's own for the grants made
 * to it, and a new one each time its wait gives a grant back (rlk_acq.wait_id). */
uint64_t rlk_wait_id_next(void);
/* Waits for wake-ups and re-attempts until acquired (1), the deadline passes (0) or an error
 * (lock_wait.c). a has had its first attempt, which found the lock busy. */
int rlk_wait_loop(rlk_acq *a, int64_t deadline);
/* The outcome r of a waiter's attempt, after the recovery every wait shares (lock_wait.c): a
 * connection error or an unsynced grant is retried while the wait lasts (sub and armed: the wait
 * loop's subscription and armed attempt, NULL for a wait without them). Returns a grant (1),
 * busy (0) or the error that ends the wait. */
int rlk_wait_recover(rlk_acq *a, rlk_sub *sub, rlk_armed *armed, int r, int64_t deadline);
/* A grant (r == 1) stays only when its replicas acknowledged it; otherwise it is given back and
 * RLOCK_EREPLICA returned. Any other r is returned as it is. */
int rlk_keep_synced(rlk_acq *a, int r);

#endif
