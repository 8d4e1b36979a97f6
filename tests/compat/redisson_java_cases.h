/*
 * The cases of the Redisson peer (redisson_java.h) that need nothing but a client and the peer,
 * so the Sentinel and Cluster programs run them on their deployments as the standalone programs
 * do on one server. Each fails the running cmocka test; names are the caller's (one slot each).
 */
#ifndef RLOCK_TESTS_REDISSON_JAVA_CASES_H
#define RLOCK_TESTS_REDISSON_JAVA_CASES_H

#include "redisson_java.h"
#include "rlock.h"

/* The watchdog timeout both sides use in rjc_watchdogs() (start the peer with it). */
#define RJC_WATCHDOG_MS 1500

/* Java readers with rlock writers, then Java writers with rlock readers: 0 violations. */
void rjc_rw_mixed(rj_peer *p, rlock_client *c, const char *name);
/* RFencedLock and rlock tokens on one name, alternating: strictly increasing. */
void rjc_fenced(rj_peer *p, rlock_client *c, const char *name);
/* 4 rlock waiters behind a Redisson holder, then 4 Redisson waiters behind an rlock holder, on
 * a fair lock: each queue served in its order. */
void rjc_fair_one_side(rj_peer *p, rlock_client *c, const char *name);
/* Where a fair queue runs: the peer, a client, and the server that holds key now (for LLEN);
 * dead, when set, a second peer whose waiters are killed (rj_kill) before the release; hold_ms,
 * when > 0, the lease of an rlock holder (else it holds with the watchdog). */
typedef struct rjc_fair_env {
    rj_peer *p;
    rlock_client *c;
    rh_server *(*queue_server)(const char *key);
    rj_peer *dead;
    int64_t hold_ms;
} rjc_fair_env;
/* The outcome of a fair queue: inversions among the granted waiters, waiters not granted, the
 * time from the first waiter's arrival to the release, from the release to the first grant and
 * from the first grant to the last. */
typedef struct rjc_fair_result {
    int inversions, not_granted_c, not_granted_j;
    double queue_ms, first_ms, span_ms;
} rjc_fair_result;
/* Queues waiters as pattern says ('c' rlock, 'j' Redisson, 'd' Redisson on e->dead, in arrival
 * order, each in the queue before the next) behind a holder of the side holder says, each
 * waiting up to wait_ms (rlock waiters 10 s longer, as their wait includes the queueing of
 * those behind them) and holding 20 ms, releases the holder and checks exclusion: grants at
 * least a hold apart. 'd' waiters count nowhere in the result. */
rjc_fair_result rjc_fair_queue(const rjc_fair_env *e, const char *name, char holder,
                               const char *pattern, int64_t wait_ms);
/* RSemaphore of 2 shared by 2 Java and 2 rlock threads (bound held, permits back); a leased
 * permit of each side released by the other side's id. */
void rjc_semaphores(rj_peer *p, rlock_client *c, const char *name, const char *leased);
/* A Redisson release wakes an rlock waiter on a semaphore of 1, and the other way round. */
void rjc_semaphore_wakeups(rj_peer *p, rlock_client *c, const char *name);
/* A latch counted down by one side wakes the other side's waiter, both ways. */
void rjc_latch(rj_peer *p, rlock_client *c, const char *name);
/* rlock_force_unlock wakes a Redisson waiter, Redisson's forceUnlock an rlock waiter. */
void rjc_force(rj_peer *p, rlock_client *c, const char *name);
/* rlock_inspect shows a Redisson holder (owner and count). */
void rjc_inspect(rj_peer *p, rlock_client *c, const char *name);
/* Redisson's watchdog keeps a Java hold 3 periods while rlock waits, and rlock's (client cw,
 * watchdog RJC_WATCHDOG_MS) an rlock hold while Redisson waits; names a and b. */
void rjc_watchdogs(rj_peer *p, rlock_client *c, rlock_client *cw, const char *a, const char *b);
/* 2 Java threads on RedissonMultiLock(names) and an rlock thread on each member: exclusion. */
void rjc_multilock(rj_peer *p, rlock_client *c, const char *const names[3]);

#endif
