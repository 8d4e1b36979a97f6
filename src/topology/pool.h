/*
 * Connection pool and command execution on one node: borrow, return, dial, and
 * rlk_pool_run_on(), where timeouts, reconnects and the one resend of an idempotent command
 * live. Which node a command goes to is route.h's. The pool knows nothing about scripts.
 */
#ifndef RLK_POOL_H
#define RLK_POOL_H

#include "context.h"
#include "conn.h"

int rlk_pool_new(rlock_client *c, rlk_pool **out);
/* A pool whose connections dial host:port (a cluster node) with the URL's credentials and TLS
 * instead of the client's data node. host is copied. */
int rlk_pool_new_at(rlock_client *c, const char *host, int port, rlk_pool **out);
void rlk_pool_free(rlk_pool *p);
/* In a child of fork(): abandons every connection the pool had open, idle or borrowed by the
 * parent's threads (rlk_conn_abandon: nothing is written), and frees the pool. */
void rlk_pool_abandon(rlk_pool *p);
/* The pool mutex, held across fork() so that the child inherits a consistent pool. */
void rlk_pool_fork_lock(rlk_pool *p);
void rlk_pool_fork_unlock(rlk_pool *p);

/* Borrows a connection, dialling one if fewer than pool_size are open; waits at most
 * command_timeout_ms for one to be returned. RLOCK_OK, RLOCK_ECONN (pool exhausted, server
 * unreachable), RLOCK_EAUTH. */
int rlk_pool_borrow(rlk_pool *p, rlk_conn **out);
/* Like rlk_pool_borrow(), a dial (when one is needed) bounded by dial_ms instead of
 * connect_timeout_ms when that is shorter: the RedLock acquire, which must not wait for a member
 * longer than its per-server timeout, and a TLS handshake with a stopped server would wait. */
int rlk_pool_borrow_dial(rlk_pool *p, int64_t dial_ms, rlk_conn **out);
/* Takes an idle, live connection if there is one, without dialling or waiting: RLOCK_OK, or
 * RLOCK_ECONN (none idle) with no last error set. For the subscriber thread, which must never
 * block on the pool. */
int rlk_pool_try_idle(rlk_pool *p, rlk_conn **out);
/* Returns a connection. broken != 0 (or a connection a failure left broken) closes it; a later
 * borrow dials a new one. */
void rlk_pool_return(rlk_pool *p, rlk_conn *conn, int broken);
/* How many idle connections were checked for liveness (polled) when borrowed: one returned
 * within the last millisecond is not. For tests. */
long rlk_pool_checks(rlk_pool *p);
/* A cluster node's pool: the replica count its connections sync with (replica.c); NULL for the
 * client's own pool, whose connections use the client's. */
rlk_replicas *rlk_pool_replicas(rlk_pool *p);
/* Adds a connection dialled outside the pool (rlock_client_new()'s probe) as an idle one. */
void rlk_pool_adopt(rlk_pool *p, rlk_conn *conn);
/* The data node moved (a Sentinel failover): closes the idle connections, forgets the dial
 * backoff, and makes every connection dialled before now close when it is returned. */
void rlk_pool_reset(rlk_pool *p);

/* Flags for rlk_cmd()/rlk_pool_run()/rlk_script(). */
#define RLK_IDEMPOTENT 1 /* safe to resend on a fresh connection after a connection failure */
#define RLK_SYNCED     2 /* rlk_script(): the replicas' WAIT follows, as for a granting script */

/* A list of arguments (binary-safe) with inline storage for numbers. */
#define RLK_ARGS_MAX 24
typedef struct rlk_args {
    int n;
    const char *v[RLK_ARGS_MAX];
    size_t len[RLK_ARGS_MAX];
    char num[RLK_ARGS_MAX][24];
} rlk_args;

void rlk_args_init(rlk_args *a);
void rlk_args_add(rlk_args *a, const char *p, size_t len); /* borrowed: p must outlive use */
void rlk_args_adds(rlk_args *a, const char *s);
void rlk_args_addi(rlk_args *a, int64_t v); /* formatted into inline storage */

/* One exchange on a borrowed connection, for rlk_pool_run(): RLOCK_OK with *out set, or an
 * error. An error that left the connection broken (rlk_conn_broken()) closes it; any other
 * error returns it to the pool. */
typedef int (*rlk_exchange_fn)(rlk_conn *conn, void *arg, redisReply **out);

/* Runs fn on a connection of pool. With RLK_IDEMPOTENT, a connection failure that proves the
 * request never reached Redis (rlk_conn_resendable()) is retried once on a fresh connection.
 * Errors as rlk_pool_run() (route.h), which calls it with the client's pool or a node's. */
int rlk_pool_run_on(rlock_client *c, rlk_pool *pool, int flags, rlk_exchange_fn fn, void *arg,
                    redisReply **out);

/* Bounds every command the calling thread runs through the pool from now on: one that cannot
 * finish by until_ms (rlk_now_ms() clock) is given only the time left, and none is sent once it
 * has passed (RLOCK_ECONN). A lock call that waits sets it to its deadline plus
 * command_timeout_ms, so that commands sent as its wait ends (a give-up, a last attempt) cannot
 * stretch the call further. 0 = no bound. Nested bounds keep the earlier one. Returns the bound
 * in force before, which the caller puts back with rlk_pool_bound_restore() when done. */
int64_t rlk_pool_bound(int64_t until_ms);
void rlk_pool_bound_restore(int64_t saved);
/* The calling thread's bound (0: none). */
int64_t rlk_pool_bound_get(void);

#endif
