/*
 * The real Redisson as a peer: a JVM running tests/compat/java's peer program on the released
 * org.redisson:redisson (the jar named by $RLOCK_REDISSON_JAR), driven over its stdin/stdout,
 * and an independent checker both the C side and that JVM map (a file, no Redis).
 */
#ifndef RLOCK_TESTS_REDISSON_JAVA_H
#define RLOCK_TESTS_REDISSON_JAVA_H

#include <stdatomic.h>
#include <stdint.h>

#include "redis_harness.h"
#include "rlock.h"

typedef struct rj_peer rj_peer;

/* The peer's jar ($RLOCK_REDISSON_JAR), or NULL when it is unset or missing. */
const char *rj_jar(void);

/* A cmocka group setup: skips the program (exit 77) without redis-server, java or the jar. */
int rj_require(void **state);

/* Starts a peer JVM with one RedissonClient on s (lockWatchdogTimeout watchdog_ms when > 0) and
 * waits until it connected; fails the running test when it does not within 30 s. */
rj_peer *rj_start(rh_server *s, int64_t watchdog_ms);
/* The same on where: a URL, or "cluster:" and comma-separated seed URLs (a cluster client). */
rj_peer *rj_start_at(const char *where, int64_t watchdog_ms);
/* The same with Redisson's fairLockWaitTimeout set to fair_wait_ms when > 0 and, when faketime
 * is set, the JVM's wall clock shifted by libfaketime (its FAKETIME, e.g. "+600"). */
#define RJ_LIBFAKETIME "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
rj_peer *rj_start_fair(const char *where, int64_t watchdog_ms, int64_t fair_wait_ms,
                       const char *faketime);

/* Redisson's id of the peer's client (the "<uuid>" of its lock owners) and its version. */
const char *rj_id(const rj_peer *p);
const char *rj_version(const rj_peer *p);

/* Sends "<op args>" (printf format) to the peer's worker thread named worker (created on first
 * use; a Redisson lock belongs to a thread) and returns the request's id without waiting. */
int rj_send(rj_peer *p, const char *worker, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Waits up to timeout_ms for the reply to request id: a malloc'd string (the reply text after
 * the id), or NULL on timeout. */
char *rj_wait(rj_peer *p, int id, int64_t timeout_ms);

/* rj_send() then rj_wait() up to 60 s; fails the running test on timeout. */
char *rj_call(rj_peer *p, const char *worker, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* rj_call() whose reply's first word must be want (the reply is freed). */
void rj_expect(rj_peer *p, const char *worker, const char *want, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The number after the first word of a reply ("ok 1234.5" -> 1234.5): the peer's monotonic ms. */
double rj_reply_ms(const char *reply);

/* CLOCK_MONOTONIC in ms with fractions, the clock of rj_reply_ms(). */
double rj_now_ms(void);

/* A client on s from tc_options() (so over TLS it trusts the test CA), failing the running test
 * when there is none; and a handle on name of a client of its own (free with tc_close_own()). */
rlock_client *rj_client(const rh_server *s);
rlock *rj_open_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c);

/* Ends the peer (its workers finish their requests first), killing its PID after 30 s. */
void rj_stop(rj_peer *p);
/* SIGKILL of the peer's JVM (its Redis state stays as it was), then rj_stop()'s cleanup. */
void rj_kill(rj_peer *p);

/* The checker: per slot writers and readers inside, violations, exclusive and read sections. */
#define RJ_CK_SLOTS 16
typedef struct rj_ck_slot {
    atomic_llong writers, readers, violations, entries, reads, pad[3];
} rj_ck_slot;
typedef struct rj_checker {
    rj_ck_slot slot[RJ_CK_SLOTS];
} rj_checker;

/* A zeroed checker in a file under /dev/shm (its path in path) that forked children inherit and
 * the peer maps. */
rj_checker *rj_checker_new(char path[64]);
void rj_checker_free(rj_checker *ck, const char *path);
void rj_ck_enter(rj_checker *ck, int slot);
void rj_ck_leave(rj_checker *ck, int slot);
void rj_ck_read_enter(rj_checker *ck, int slot);
void rj_ck_read_leave(rj_checker *ck, int slot);
/* A permit holder's section on slot: a violation when more than bound are inside (leave with
 * rj_ck_read_leave()). */
void rj_ck_permit_enter(rj_checker *ck, int slot, long long bound);

#endif
