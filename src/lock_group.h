/*
 * Helpers shared by the two group lock types (lock_multi.c and lock_redlock.c).
 */
#ifndef RLK_LOCK_GROUP_H
#define RLK_LOCK_GROUP_H

#include "lock.h"

/* Checks a member list: locks != NULL, n >= 1, no NULL member, no member that is itself a group,
 * no handle twice; for a RedLock also n <= RLK_REDLOCK_MAX, reentrant members only (else
 * RLOCK_ENOTSUP) and one client per member. RLOCK_OK or RLOCK_EINVAL with a message. */
int rlk_group_check_members(rlock *const *locks, size_t n, int redlock);

/* RLOCK_ENOTSUP for the operations a group does not have (force unlock, hold count, TTL). */
int rlk_group_unsupported(rlock *l);
int64_t rlk_group_ttl(rlock *l);

/* A per-thread xorshift generator for the random pauses between rounds (quality is irrelevant;
 * it only has to differ between threads and processes). */
uint64_t rlk_group_rand(void);
/* Sleeps ms milliseconds (nothing if ms <= 0). */
void rlk_group_sleep_ms(int64_t ms);

/* The most servers of a RedLock (and of a parallel round). */
#define RLK_REDLOCK_MAX 16

/* One server's part of a parallel round. */
typedef struct rlk_rl_io {
    rlk_conn *conn;
    int active;  /* a command of this round goes to this server */
    int waiting; /* its reply is awaited */
    int stale;   /* an earlier reply never came: the connection is only written to now */
    int retried; /* NOSCRIPT handled once */
    int err;     /* RLOCK_OK or this server's error in this round */
    int64_t deadline;
    redisReply *reply;
    rlk_args keys, args;
} rlk_rl_io;

typedef struct rlk_rl_round {
    size_t n;
    rlock *const *members; /* one per server */
    int script;            /* RLK_SCRIPT_* or -1 for a plain command in args */
    /* Answers wanted before the per-server timeouts apply, and the bound on waiting for them
     * (monotonic ms). 0 = per-server timeouts only, as an acquire must use them. */
    int need;
    int64_t hard_deadline;
    rlk_rl_io io[RLK_REDLOCK_MAX];
} rlk_rl_round;

/* The per-server reply timeout of a RedLock member (its client's redlock_server_timeout_ms). */
int64_t rlk_group_server_timeout(const rlock *m);

/* A parallel round: one command per server, all sent before any reply is read, replies read
 * with poll() until each server answered or its per-server timeout passed. Connections stay
 * borrowed across the rounds of one attempt (rlk_rl_prepare() starts the next command); a
 * server that did not answer keeps its connection, which is then only written to, so a later
 * command (the release) runs right behind the unanswered one when the server wakes up. */
void rlk_rl_round_init(rlk_rl_round *r, rlock *const *members, size_t n);
/* Starts a new command: clears the previous replies, errors and the active flags; the caller
 * then sets io[i].active and fills io[i].keys/args (script >= 0) or io[i].args (script -1: a
 * plain command, args[0] is the command name). */
void rlk_rl_prepare(rlk_rl_round *r, int script);
/* Sends to every active server, then reads the replies (io[i].reply, or io[i].err). */
void rlk_rl_run(rlk_rl_round *r);
/* Returns every connection to its pool (closing those with a reply outstanding). */
void rlk_rl_round_end(rlk_rl_round *r);
/* Outside acquisition a slow majority is waited for, up to the largest command timeout of the
 * members, before the per-server timeouts apply: a release or a query needs answers, not speed
 * (servers beyond the majority still only get their per-server timeout). */
void rlk_rl_patient(rlk_rl_round *r);
/* rlk_err(code, "RedLock: <what>: <the current last error>"). */
int rlk_rl_wrap(int code, const char *what);
/* A random pause before the next attempt, in [1, 2 x the largest per-server timeout] ms, so that
 * contenders that split the votes do not collide again. */
int64_t rlk_rl_pause(rlock *const *members, size_t n);

#endif
