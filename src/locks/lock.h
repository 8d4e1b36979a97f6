/*
 * Lock handles, per-thread hold records and the shared acquire/wait loop. Two levels of
 * dispatch: rlk_lock_ops says what each public call does for a handle (single-key types use the
 * generic rlk_single_* functions, groups their own); rlk_single_ops says how a single-key type
 * attempts, releases, names its channel and joins or leaves a queue. The wait loop, holds,
 * fencing tokens, watchdog registration and lost leases are shared. This header declares the
 * type tables, lock.c's functions and the generic rlk_single_* calls the tables name (lock.c,
 * lock_acquire.c, lock_release.c, lock_query.c, lock_extend.c); lock_hold.h, lock_release.h,
 * lock_query.h, lock_extend.h, lock_wait.h, lock_spin.h, lock_lost.h, hold_index.h,
 * release_reply.h, lock_reentrant.h, lock_fair.h and lock_rw.h those of the files they are named
 * after.
 */
#ifndef RLK_LOCK_H
#define RLK_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

#include "client.h"
#include "pool.h"
#include "pubsub.h"
#include "scripts.h"
#include "watchdog.h"

typedef struct rlk_hold rlk_hold;
typedef struct rlk_acq rlk_acq;

typedef struct rlk_lock_ops {
    /* wait_ms: 0 = one attempt, < 0 = no limit. lease_ms: > 0 lease, < 0 watchdog. Validated. */
    int (*acquire)(rlock *l, int64_t wait_ms, int64_t lease_ms);
    int (*unlock)(rlock *l);
    int (*force_unlock)(rlock *l);
    int (*is_locked)(rlock *l);
    int (*is_held)(rlock *l);
    int (*hold_count)(rlock *l);
    int64_t (*ttl)(rlock *l);
    uint64_t (*token)(rlock *l);
    void (*destroy)(rlock *l); /* frees type-specific state (not the handle itself) */
    /* 1 for a group (multi-lock, RedLock): a handle over member handles, with no client of its
     * own (its members check theirs) that may not itself be a member of a group. */
    int group;
    /* Bytes of a hold record: 0 for a plain rlk_hold; a type that keeps more per thread embeds
     * rlk_hold as the member `base` of a larger struct (RedLock). */
    size_t hold_size;
    /* rlock_extend() of the calling owner's hold (rlk_thread_id()): lease_ms validated. */
    int (*extend)(rlock *l, int64_t lease_ms);
    /* Groups only: the rlock_metric_kind they report as, and their first member, whose client
     * and name their reports carry (lock_observe.c). */
    int obs_kind;
    rlock *(*first_member)(rlock *l);
} rlk_lock_ops;

typedef struct rlk_single_ops {
    /* One attempt. Returns 1 acquired (a->token set), 0 busy (a->ttl_ms = holder's TTL bound or
     * -1 if unknown), or a negative error. a->may_queue is 0 for a single-attempt try_lock
     * (a fair lock must then not join its queue). */
    int (*attempt)(rlk_acq *a);
    /* Channel this waiter listens on (appended to ch). */
    int (*channel)(rlk_acq *a, rlk_buf *ch);
    /* 1: listen on channel through its literal pattern (rlk_sub_join_pattern), which PUBSUB
     * NUMSUB does not count: the reentrant lock, whose releases publish on Redisson's channel
     * only when a plain subscriber (a Redisson waiter) listens there. */
    int channel_pattern;
    /* Optional: wait_begin is called once before the first wait; wait_end once when waiting
     * ends (acquired or not), on every path after a busy first attempt, even if joining the
     * channel or wait_begin failed (so it must cope with a missing wait_begin). The fair lock
     * registers/cancels its liveness heartbeat here and leaves the queue on give-up. wait_end
     * returns 1 when the give-up found the waiter granted the lock by a release (a->token set,
     * a->granted_ttl too when the hold must be extended), a negative error when the give-up did
     * not reach Redis (the waiter's entries stay, and a release may still grant it the lock),
     * else 0. With a->scratch NULL and acquired 0 it only leaves, which lock_release.c uses to
     * settle a wait whose give-up failed (RLK_UNSURE_LEAVE). */
    int (*wait_begin)(rlk_acq *a);
    int (*wait_end)(rlk_acq *a, int acquired);
    /* Releases one hold of a->owner. Returns 1 fully released, 0 still held (count > 0),
     * RLK_NOT_HELD if Redis says the owner holds nothing, or a negative error. */
    int (*release)(rlk_acq *a);
    /* Renewal class for holds taken with the watchdog. */
    const rlk_renew_class *renew;
    /* Optional: writes the lock-hash field of owner ("<uuid>:<tid>", owner_len bytes) into out
     * (RLK_OWNER_MAX bytes, NUL-terminated) and returns its length. NULL: the field is the owner
     * itself. The read-write lock's write side adds its ":write" suffix here, so the generic
     * layer never knows a lock type's field format. */
    size_t (*hash_field)(const char *owner, size_t owner_len, char *out);
    /* Optional pair that lets a waiter arm its attempt (pubsub.h, rlk_armed): attempt_format
     * formats the script call attempt() would send (malloc()ed request bytes); attempt_reply
     * decodes its reply (a non-error reply) exactly as attempt() does, with the same results. */
    int (*attempt_format)(rlk_acq *a, char **cmd, size_t *len);
    int (*attempt_reply)(rlk_acq *a, redisReply *r);
    /* Optional: the wait after a busy first attempt, in place of rlk_wait_loop() (same results);
     * the spin lock polls here instead of subscribing, and channel may then be NULL. */
    int (*wait)(rlk_acq *a, int64_t deadline);
    /* Makes the remaining lease of a->field's hold at least lease_ms (lua/lock_extend.lua):
     * 1 done, RLK_NOT_HELD when the owner holds nothing on Redis, or a negative error. Hash
     * types use rlk_hash_extend(); the read side adds its timeout keys. */
    int (*extend)(rlk_acq *a, int64_t lease_ms);
    /* Optional: frees the type's state in rlock.impl (NULL is passed on) when the handle is
     * freed, by rlk_single_destroy() after the hold records are gone. */
    void (*impl_free)(void *impl);
} rlk_single_ops;

/* The rlk_lock_ops of every single-key lock type: the generic rlk_single_* calls, with the type's
 * own force_unlock and is_locked, as designated initializers to put between the table's braces.
 * One list, so a call added to the generic layer reaches every type at once. */
#define RLK_SINGLE_LOCK_OPS(force_unlock_fn, is_locked_fn)                                         \
    .acquire = rlk_single_acquire, .unlock = rlk_single_unlock, .force_unlock = (force_unlock_fn), \
    .is_locked = (is_locked_fn), .is_held = rlk_single_is_held,                                    \
    .hold_count = rlk_single_hold_count, .ttl = rlk_single_ttl, .token = rlk_single_token,         \
    .destroy = rlk_single_destroy, .extend = rlk_single_extend

#define RLK_NOT_HELD 2

/* rlk_hold.unsure: a release of one hold may have run (count may be one above Redis'); an
 * attempt may have been granted, or a release that fewer replicas acknowledged may have been
 * undone by a failover (Redis may count one hold more than the record). */
#define RLK_UNSURE_RELEASE 1
#define RLK_UNSURE_GRANT   2
/* With RLK_UNSURE_GRANT: a wait's give-up (single->wait_end) did not reach Redis, so its grant
 * registration may remain and a release may grant the thread the lock after the call returned.
 * The settle leaves again first, so that no grant can follow the count it reads. */
#define RLK_UNSURE_LEAVE 4

/* Per (handle, thread) state of a hold. Only its thread changes count/token; the watchdog may
 * set lost. Linked in the handle's list under the handle mutex. */
struct rlk_hold {
    struct rlk_hold *next;
    rlock *lock;
    uint64_t tid;
    int count;         /* holds this thread took through this handle */
    atomic_uchar lost; /* set by the watchdog: the lease ran out while held */
    /* RLK_UNSURE_* flags: a request of this thread whose outcome is unknown (the connection
     * failed before its reply). The thread's next unlock or lock settles it against Redis first
     * (lock_acquire.c, lock_release.c). A char beside lost keeps the record at 120 bytes. */
    unsigned char unsure;
    uint64_t token;   /* fencing token of the current hold */
    int64_t lease_ms; /* effective lease of the latest acquire (kept on partial release) */
    rlk_wd_entry wd;  /* watchdog registration (renewed while registered) */
    /* When the observed hold began (rlk_obs_now_ns()); 0: not observed, or its end already
     * reported. Whoever ends it (unlock, watchdog) takes it with an exchange (lock_observe.c). */
    atomic_llong obs_t0;
};

/* A per-hold loss callback (rlock_lock_args.on_lost) of the owner tid on a handle (lock_lost.c).
 * group != NULL: the hold is a member's share of a multi-lock's hold, whose callback (on the
 * group handle) fires when this member's hold is lost. */
typedef struct rlk_hold_cb {
    struct rlk_hold_cb *next;
    uint64_t tid;
    void (*fn)(rlock *lock, void *user_data);
    void *user_data;
    rlock *group;
} rlk_hold_cb;

struct rlock {
    const rlk_lock_ops *ops;
    const rlk_single_ops *single; /* single-key types only */
    rlock_client *client;         /* single-key types only (see rlk_lock_ops.group) */
    uint16_t kind;                /* an rlock_kind, narrowed to leave room for gen */
    /* The fork generation (rlk_fork_gen(), mod 2^16: it counts nested forks) the hold records
     * belong to; a child forgets the parent's on its first use of the handle. */
    atomic_ushort gen;
    uint32_t name_len;  /* names are at most 1 MiB; packed beside kind to save memory */
    pthread_mutex_t mu; /* guards holds */
    rlk_hold *holds;
    rlk_hold_cb *cbs; /* per-hold loss callbacks, guarded by mu (lock_lost.c) */
    void *impl;       /* type-specific state */
    char name[];      /* the lock name, NUL-terminated; "" for groups */
};

/* One acquisition or release in progress, on the caller's stack. */
struct rlk_acq {
    rlock *lock;
    rlock_client *client;
    rlk_hold *hold;
    uint64_t tid;
    char owner[RLK_OWNER_MAX]; /* "<uuid>:<tid>" */
    size_t owner_len;
    char field[RLK_OWNER_MAX]; /* hash field: owner, or what single->hash_field makes of it */
    size_t field_len;
    int64_t lease_ms; /* effective lease: the caller's, or watchdog_timeout_ms */
    int64_t wait_ms;  /* the caller's wait (< 0 none), for fair queue deadlines */
    /* Unique in the process: a grant names the wait it is for. It changes before every give-back
     * of a wait (lock_wait.c's wait_rewait), so that no grant made before a give-back is believed.
     */
    uint64_t wait_id;
    uint64_t confirms; /* rlk_pubsub_confirms() before the first attempt (rlk_wait_loop) */
    int arm_n;         /* replicas the armed attempt's WAIT asks for (rlk_wait_loop) */
    /* Flags, as chars beside arm_n: a loop client's waiting operation embeds this record, and
     * its size decides the memory per pending wait (bench loop_waits, at most 512 bytes). */
    unsigned char may_queue;    /* the attempt may record the caller as a waiter */
    unsigned char watchdog;     /* the hold is kept by the watchdog (the caller's lease_ms < 0) */
    unsigned char leave_failed; /* the wait's give-up did not reach Redis (rlk_wait_loop) */
    unsigned char back_failed;  /* the give-back of a short grant failed: it may stand */
    int64_t ttl_ms;             /* out of attempt() */
    /* > 0: a release granted the lock to this waiter with this TTL (rlk_grant_ttl): a longer
     * lease is renewed within a third of it (hold_grant in lock_acquire.c). */
    int64_t granted_ttl;
    uint64_t token;             /* out of attempt() */
    void *scratch;              /* type-specific */
    const rlock_cancel *cancel; /* the call's token (rlk_call_cancel()), NULL: none */
};

/* Creates a handle of a single-key type (called by rlock_open()). */
rlock *rlk_single_new(rlock_client *c, rlock_kind kind, const char *name, const rlk_lock_ops *ops,
                      const rlk_single_ops *single);
/* Fills a with the calling thread's identity for l. */
void rlk_acq_init(rlk_acq *a, rlock *l);
/* The lock hash field of owner for l: the type's own form (rlk_single_ops.hash_field) or the
 * owner itself, NUL-terminated in out (RLK_OWNER_MAX bytes); returns its length. */
size_t rlk_hash_field_of(const rlock *l, const char *owner, size_t owner_len, char *out);

/* Generic implementations for single-key types: acquire in lock_acquire.c, unlock in
 * lock_release.c, the queries, token and destroy in lock_query.c, extend in lock_extend.c. */
int rlk_single_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms);
int rlk_single_unlock(rlock *l);
int rlk_single_is_held(rlock *l);
int rlk_single_hold_count(rlock *l);
int64_t rlk_single_ttl(rlock *l);
int rlk_single_extend(rlock *l, int64_t lease_ms);
/* The calling thread's token from its hold record (0 with no hold, or a lost one); also the
 * token of groups that keep their token in rlk_hold (RedLock). */
uint64_t rlk_single_token(rlock *l);
void rlk_single_destroy(rlock *l);

/* Generic queries on the lock hash (reentrant, fair, write): EXISTS name. */
int rlk_hash_is_locked(rlock *l);

/* In the child of a fork(), forgets the hold records l inherited from the parent (no-op
 * otherwise). rlk_hold_get() and rlk_hold_forget_all() call it; code that walks l->holds itself
 * calls it first. */
void rlk_handle_refresh(rlock *l);

/* Handle allocation shared by groups: zeroed handle with mutex, ops, no client. */
rlock *rlk_handle_alloc(const rlk_lock_ops *ops);

#endif
