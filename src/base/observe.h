/*
 * The observation core: every layer reports what happened through these calls, and each report
 * becomes an event that two sinks consume: the client's figures (metrics.c), always, and the
 * user's hook (rlock_client_on_event()), when set. Call them on the thread that did the work and
 * never with a mutex of rlock held: the hook may call back into rlock on the same client.
 * Hot-path cost: relaxed atomics only, no lock, no allocation; no hook is one branch.
 * Built with RLOCK_NO_METRICS (the benchmark's "off" library) every call does nothing.
 */
#ifndef RLK_OBSERVE_H
#define RLK_OBSERVE_H

#include <stdatomic.h>
#include <stdint.h>

#include "metrics.h"

/* One hook as set by rlock_client_on_event(); never freed before the client, so a thread that
 * loaded it may call it while another thread sets the next one. */
typedef struct rlk_hook {
    void (*fn)(const rlock_event *ev, void *user_data);
    void *user_data;
    struct rlk_hook *older;
} rlk_hook;

/* The observation state of a client (struct rlock_client's obs). */
typedef struct rlk_obs {
    _Atomic(rlk_hook *) hook; /* the current hook, NULL for none */
    rlk_hook *all;            /* every hook ever set (freed with the client), under m.watch_mu */
    rlk_metrics m;
} rlk_obs;

void rlk_obs_init(rlk_obs *o);
void rlk_obs_destroy(rlk_obs *o);

/* Monotonic time in ns (0 when built with RLOCK_NO_METRICS): what a hold records at its
 * acquisition, for rlk_obs_release()/rlk_obs_lost(). */
int64_t rlk_obs_now_ns(void);

/* 1 when the client has a hook: a caller formats what only an event needs (the owner) then. */
int rlk_obs_hooked(const rlock_client *c);

/* The metric kind of a lock kind (RLOCK_SPIN counts as reentrant, see rlock.h). */
int rlk_obs_kind_of(rlock_kind k);

/* One acquire call in progress, on the caller's stack. */
typedef struct rlk_obs_wait {
    int64_t t0; /* when the call began (ns) */
    int kind;   /* rlock_metric_kind */
    rlk_watch *watch;
} rlk_obs_wait;

/* An acquire call (lock, try_lock, lock_ex, acquire, await) begins: raises the waiters gauge
 * and emits WAIT_BEGIN. Every begin must be followed by exactly one rlk_obs_acquire_end(). */
void rlk_obs_acquire_begin(rlock_client *c, rlk_obs_wait *w, int kind, const char *name,
                           const char *owner);

/* The call ends with rc: lowers the waiters gauge, observes the wait histogram once, counts
 * rlock_acquire_total{result} (ok; RLOCK_ETIMEDOUT: timeout; RLOCK_ECANCELED: canceled; any other
 * code: error) and emits ACQUIRED or WAIT_FAILED. hold_count is the hold count after a success:
 * 1 raises the holds gauge (a new hold), above 1 is a re-entry and does not. Returns rc. */
int rlk_obs_acquire_end(rlock_client *c, rlk_obs_wait *w, const char *name, const char *owner,
                        int rc, uint64_t token, int hold_count);

/* A full release of a hold taken at acquired_ns (rlk_obs_now_ns()): lowers the holds gauge,
 * observes the hold histogram (not when acquired_ns is 0) and emits RELEASED. Re-entries'
 * releases that leave a hold are not reported. */
void rlk_obs_release(rlock_client *c, int kind, const char *name, const char *owner,
                     int64_t acquired_ns, uint64_t token);

/* A hold found gone (watchdog loss): lowers the holds gauge, counts rlock_lost_total{kind} and
 * emits LOST. The hold it ends is then never reported as released. */
void rlk_obs_lost(rlock_client *c, int kind, const char *name, const char *owner,
                  int64_t acquired_ns, uint64_t token);

/* Moves the holds gauge of kind (and of name, when watched) by n, without an event: a
 * semaphore's gauge counts permits, so an acquire or release of several moves it by more than
 * the one that rlk_obs_acquire_end() or rlk_obs_release() accounts for. */
void rlk_obs_holds_add(rlock_client *c, int kind, const char *name, int64_t n);

/* A hold dropped without a release or a loss (its handle freed while held, a fork child's
 * inherited record): lowers the holds gauge only. */
void rlk_obs_forget(rlock_client *c, int kind, const char *name);

/* Raises a plain counter by 1 or by n (no event). */
void rlk_obs_count(rlock_client *c, rlk_counter which);
void rlk_obs_add(rlock_client *c, rlk_counter which, uint64_t n);

/* The client now talks to another master: counts rlock_failovers_total and emits FAILOVER with
 * detail "host:port". */
void rlk_obs_failover(rlock_client *c, const char *host, int port);

/* Too few replicas acknowledged a write of name's (kind may be -1): counts
 * rlock_replica_sync_failures_total and emits REPLICA_SYNC_FAILED with result. */
void rlk_obs_replica_sync_failed(rlock_client *c, int kind, const char *name, const char *owner,
                                 int result);

#endif
