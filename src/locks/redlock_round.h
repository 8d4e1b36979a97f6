/*
 * RedLock's parallel round: one command per server, all sent before any reply is read, replies
 * read with poll() until each server answered or its per-server timeout passed. Connections stay
 * borrowed across the rounds of one attempt (rlk_round_prepare() starts the next command); a
 * server that did not answer keeps its connection, which is then only written to, so a later
 * command (the release) runs right behind the unanswered one when the server wakes up.
 */
#ifndef RLK_REDLOCK_ROUND_H
#define RLK_REDLOCK_ROUND_H

#include "lock.h"
#include "lock_group.h"

/* One server's part of a round. */
typedef struct rlk_round_io {
    rlk_conn *conn;
    int active;  /* a command of this round goes to this server */
    int waiting; /* its reply is awaited */
    int stale;   /* an earlier reply never came: the connection is only written to now */
    int retried; /* NOSCRIPT handled once */
    int err;     /* RLOCK_OK or this server's error in this round */
    /* The pool conn came from: the member client's, or on a cluster client the pool of the
     * master that served the member's name when it was borrowed (at map epoch). */
    rlk_pool *pool;
    uint64_t epoch;
    int refresh; /* a cluster member was redirected or unreachable: read the map again */
    int64_t deadline;
    redisReply *reply;
    rlk_args keys, args;
} rlk_round_io;

typedef struct rlk_round {
    size_t n;
    rlock *const *members; /* one per server */
    int script;            /* RLK_SCRIPT_* or -1 for a plain command in args */
    /* Answers wanted before the per-server timeouts apply, and the bound on waiting for them
     * (monotonic ms). 0 = per-server timeouts only, as an acquire must use them. */
    int need;
    int64_t hard_deadline;
    rlk_round_io io[RLK_REDLOCK_MAX];
} rlk_round;

/* The per-server reply timeout of a RedLock member (its client's redlock_server_timeout_ms). */
int64_t rlk_round_server_timeout(const rlock *m);

void rlk_round_init(rlk_round *r, rlock *const *members, size_t n);
/* Starts a new command: clears the previous replies, errors and the active flags; the caller
 * then sets io[i].active and fills io[i].keys/args (script >= 0) or io[i].args (script -1: a
 * plain command, args[0] is the command name). */
void rlk_round_prepare(rlk_round *r, int script);
/* Sends to every active server, then reads the replies (io[i].reply, or io[i].err). */
void rlk_round_run(rlk_round *r);
/* Returns every connection to its pool (closing those with a reply outstanding); a cluster
 * member that answered MOVED or could not be reached has its client's slot map read again, so
 * that the next attempt goes to the master that serves its name now. */
void rlk_round_end(rlk_round *r);
/* Outside acquisition a slow majority is waited for, up to the largest command timeout of the
 * members, before the per-server timeouts apply: a release or a query needs answers, not speed
 * (servers beyond the majority still only get their per-server timeout). */
void rlk_round_patient(rlk_round *r);

#endif
