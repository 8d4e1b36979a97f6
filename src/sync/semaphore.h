/*
 * Semaphore handles, private to semaphore.c (plain permits, setup, queries) and
 * semaphore_leased.c (leased permits and their watchdog renewals, semaphore_leased.h). This
 * header declares semaphore.c's functions.
 */
#ifndef RLK_SEMAPHORE_H
#define RLK_SEMAPHORE_H

#include <pthread.h>
#include <stdatomic.h>

#include "client.h"
#include "pool.h"
#include "watchdog.h"

/* Score of a leased permit without expiry (Redisson's NON_EXPIRABLE). */
#define RLK_SEM_NO_EXPIRY INT64_C(922337203685477)

/* One leased permit taken through a handle (kept so that release can stop its renewals and
 * so that a loss can be reported). Linked in the handle's list under its mutex. */
typedef struct rlk_permit {
    struct rlk_permit *next;
    rlock_semaphore *sem;
    unsigned char id[16];
    int watched;         /* registered with the watchdog */
    atomic_int lost;     /* set by the watchdog: the lease ran out while held */
    int64_t acquired_ns; /* rlk_obs_now_ns() at acquisition, for the hold time */
    rlk_wd_entry wd;
} rlk_permit;

struct rlk_sem_pending;

struct rlock_semaphore {
    rlock_client *client;
    pthread_mutex_t mu; /* guards permits and pending */
    rlk_permit *permits;
    struct rlk_sem_pending *pending; /* acquire calls left unsettled (semaphore.c) */
    atomic_int has_pending;          /* pending != NULL, read without the mutex */
    atomic_uint gen; /* the fork generation the permits belong to (rlk_sem_refresh) */
    rlk_buf channel; /* redisson_sc:{name} */
    rlk_buf timeout; /* {name}:timeout */
    size_t name_len;
    char name[];
};

/* The request of one call whose reply may be lost (a release, a count-down, an acquire): a
 * random id whose key, {name}:rlock_request:<32 hex> (rlock's own, in the name's slot and under
 * the ACL patterns of docs/acl.md), the call's scripts pass, so that running one again is a
 * no-op for request_ttl ms after its first run (rlk_sem_run). Semaphores derive it by Redisson's
 * rule (name:rlock_request:... when the name holds '{'); the latch always adds the braces, as its
 * channel does, since a latch name on a cluster may hold a '{' but no '}'. */
typedef struct rlk_sem_req {
    rlk_buf key;
    int lost; /* a reply was lost: a copy of the request may have run, or may still run */
} rlk_sem_req;

/* A new request on the object called name (braces: always {name}, see above): RLOCK_OK or
 * RLOCK_ENOMEM. */
int rlk_sem_req_init(rlk_sem_req *q, const char *name, size_t len, int braces);
void rlk_sem_req_free(rlk_sem_req *q);
/* How long a request key is kept (ms): beyond every resend of the call that made it. */
int64_t rlk_sem_req_ttl(const rlock_client *c);
/* Runs script, which q's key makes safe to run twice, and sends it again after each lost reply
 * (RLOCK_ECONN, RLOCK_ETLS; q->lost set) for up to command_timeout_ms after the first one.
 * RLOCK_OK with *out, or the last error (what and name in its text). */
int rlk_sem_run(rlock_client *c, rlk_sem_req *q, int script, const rlk_args *keys,
                const rlk_args *args, redisReply **out, const char *what, const char *name);
/* Writes id as 32 lower-case hex digits and a NUL. */
void rlk_sem_hex(const unsigned char id[16], char out[RLOCK_PERMIT_ID_LEN + 1]);

/* Checks sem and its client: RLOCK_OK, RLOCK_EINVAL (NULL), RLOCK_ECLOSED. */
int rlk_sem_check(rlock_semaphore *sem);
/* rlk_sem_check() for a call with a token (NULL: none): a fired token ends the call with
 * RLOCK_ECANCELED before the check, whose settlement of pending calls sends commands. */
int rlk_sem_check_cancel(rlock_semaphore *sem, const rlock_cancel *cancel);

/* The caller's wall clock in epoch ms (Redisson's lease scores are client epoch times). */
int64_t rlk_epoch_ms(void);

/* Returns the leased permit id on Redis (sem_release_leased.lua, resent after a lost reply and
 * applied once): *v is 1 released, 0 released after its lease ran out, -1 no such permit; or a
 * negative error. */
int rlk_sem_release_id(rlock_semaphore *sem, const unsigned char id[16], long long *v);

/* The keys and arguments of sem_acquire.lua for one attempt of the acquire call q (as
 * sem_attempt() sends them; loop clients format them with rlk_script_format()): n permits, plain
 * (ids NULL) or leased with n ids expiring at expiry (epoch ms). They borrow sem, q and ids. */
void rlk_sem_attempt_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t n,
                          int64_t expiry, const unsigned char (*ids)[16], rlk_args *keys,
                          rlk_args *args);
/* Decodes sem_acquire.lua's reply: 1 acquired, 0 not (*hint_ms: ms until the earliest lease
 * runs out, or -1), RLOCK_EPROTO for another shape. */
int rlk_sem_attempt_reply(const rlock_semaphore *sem, const redisReply *rep, int64_t *hint_ms);
/* The keys and arguments of sem_acquire_cancel.lua, which settles the acquire call q of n permits
 * (ids as for the attempt) after a lost reply: keep (1) keeps what it took, else it is given back;
 * either way no later copy of its attempts takes anything. Its reply: 2 kept, 1 given back, 0 it
 * had taken nothing. They borrow sem, q and ids. */
void rlk_sem_settle_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t n, int keep,
                         const unsigned char (*ids)[16], rlk_args *keys, rlk_args *args);
/* The expiry score of permits leased now for lease_ms (< 0: the watchdog's lease). */
int64_t rlk_sem_expiry(const rlock_semaphore *sem, int64_t lease_ms);
/* The keys and arguments of sem_release.lua (permits plain permits, request q) and of
 * sem_release_leased.lua (the permit id), borrowing sem, q and id. */
void rlk_sem_release_args(const rlock_semaphore *sem, const rlk_sem_req *q, int64_t permits,
                          rlk_args *keys, rlk_args *args);
void rlk_sem_release_id_args(const rlock_semaphore *sem, const rlk_sem_req *q,
                             const unsigned char id[16], rlk_args *keys, rlk_args *args);

/* The keys and arguments of the one-argument scripts sem_try_set.lua (arg: permits; append the
 * TTL for the TTL form), sem_add.lua (delta) and sem_available.lua (now in epoch ms), as the
 * blocking calls send them; loop clients format them with rlk_script_format(). Borrow sem. */
void rlk_sem_call_args(const rlock_semaphore *sem, int script, int64_t arg, rlk_args *keys,
                       rlk_args *args);
/* The keys and arguments of the count-changing scripts that carry the request q:
 * sem_drain.lua (arg unused), sem_set_permits.lua and sem_release_if_exists.lua (arg: permits).
 * Borrow sem and q. */
void rlk_sem_keyed_args(const rlock_semaphore *sem, int script, const rlk_sem_req *q, int64_t arg,
                        rlk_args *keys, rlk_args *args);
/* The keys and arguments of sem_permits.lua in mode "total" or "leased" (borrowed, as sem). */
void rlk_sem_permits_args(const rlock_semaphore *sem, const char *mode, rlk_args *keys,
                          rlk_args *args);

/* After a release (r its result): logs at WARN when fewer replicas acknowledged it than asked,
 * and reports the replica sync failure for kind (rlock_metric_kind). */
void rlk_sem_warn_unsynced(const rlock_semaphore *sem, int kind, int r, const char *what);

/* Acquires by waiting on the channel: the attempt above in the shared notification wait, which
 * cancel (NULL: none) ends with RLOCK_ECANCELED. With replica sync, permits that fewer replicas
 * acknowledged are given back and the call returns RLOCK_EREPLICA. A call whose attempt lost its
 * reply is settled before it fails (also when cancelled): permits that attempt took are kept and
 * reported (RLOCK_OK), or the call is cancelled on Redis. */
int rlk_sem_acquire(rlock_semaphore *sem, int64_t n, int64_t wait_ms, int64_t lease_ms,
                    const unsigned char (*ids)[16], const rlock_cancel *cancel);

/* In the child of a fork(), forgets the records of the leased permits the handle inherited: the
 * permits are the parent's, renewed by the parent's watchdog, so the child neither renews nor
 * reports them. No-op in the process that recorded them. */
void rlk_sem_refresh(rlock_semaphore *sem);

#endif
