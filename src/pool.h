/*
 * Connection pool and command execution. Every Redis command of the library goes through
 * rlk_cmd() or rlk_script() (or, for pipelines, a borrowed rlk_conn), so timeouts, reconnects,
 * NOSCRIPT handling and error mapping live in one place.
 */
#ifndef RLK_POOL_H
#define RLK_POOL_H

#include <hiredis.h>

#include "client.h"

/* A pooled connection. Borrowed exclusively by one thread at a time. */
typedef struct rlk_conn {
    redisContext *ctx;
    struct rlk_conn *next_idle;
} rlk_conn;

int rlk_pool_new(rlock_client *c, rlk_pool **out);
void rlk_pool_free(rlk_pool *p);

/* Borrows a connection, dialling one if fewer than pool_size are open; waits at most
 * command_timeout_ms for one to be returned. RLOCK_OK, RLOCK_ECONN (pool exhausted, server
 * unreachable), RLOCK_EAUTH. */
int rlk_pool_borrow(rlk_pool *p, rlk_conn **out);
/* Takes an idle, live connection if there is one, without dialling or waiting: RLOCK_OK, or
 * RLOCK_ECONN (none idle) with no last error set. For the subscriber thread, which must never
 * block on the pool. */
int rlk_pool_try_idle(rlk_pool *p, rlk_conn **out);
/* Writes bytes already formatted as a request straight to the connection's socket (hiredis'
 * output buffer must be empty). RLOCK_OK or RLOCK_ECONN; the connection is then broken. */
int rlk_conn_send(rlk_conn *conn, const char *buf, size_t len);
/* Returns a connection. broken != 0 closes it (a later borrow dials a new one). */
void rlk_pool_return(rlk_pool *p, rlk_conn *conn, int broken);

/* Dials a new stand-alone connection with the client's URL, timeouts, AUTH and SELECT (used by
 * the pool and by the subscriber). read_timeout_ms <= 0 leaves reads blocking. */
int rlk_dial(const rlock_client *c, int64_t read_timeout_ms, redisContext **out);

/* Flags for rlk_cmd()/rlk_script(). */
#define RLK_IDEMPOTENT 1 /* safe to resend on a fresh connection after a connection failure */

/* A list of arguments (binary-safe) with inline storage for numbers. */
#define RLK_ARGS_MAX 24
typedef struct rlk_args {
    int n;
    const char *v[RLK_ARGS_MAX];
    size_t len[RLK_ARGS_MAX];
    char num[RLK_ARGS_MAX][24];
} rlk_args;

void rlk_args_init(rlk_args *a);
void rlk_args_add(rlk_args *a, const char *p, size_t len);   /* borrowed: p must outlive use */
void rlk_args_adds(rlk_args *a, const char *s);
void rlk_args_addi(rlk_args *a, int64_t v);                  /* formatted into inline storage */

/* Runs one command. On success *out is the reply (caller freeReplyObject()s it); a Redis error
 * reply is not a failure here: the caller inspects it. Returns RLOCK_OK or RLOCK_ECONN / RLOCK_EAUTH / RLOCK_ENOMEM with last error set. */
int rlk_cmd(rlock_client *c, int flags, const rlk_args *argv, redisReply **out);

/* Runs one command given as arrays; with script >= 0 a NOSCRIPT reply loads that script and
 * resends once. The worker behind rlk_cmd() and rlk_script(). */
int rlk_exec(rlock_client *c, int flags, int argc, const char *const *argv, const size_t *lens,
             int script, redisReply **out);

/* Runs script id by EVALSHA with the given keys and args. A NOSCRIPT reply loads the script
 * (SCRIPT LOAD, checking the SHA) and retries once, invisibly. A Redis error reply becomes
 * RLOCK_EREDIS with Redis' text in the last error; *out is then NULL. */
int rlk_script(rlock_client *c, int script, int flags, const rlk_args *keys, const rlk_args *args,
               redisReply **out);

/* Lower level, for pipelines on a borrowed connection: appends EVALSHA of script. */
int rlk_script_append(rlk_conn *conn, int script, const rlk_args *keys, const rlk_args *args);
/* Formats EVALSHA of script as request bytes (*cmd malloc()ed, free() it) for rlk_conn_send(). */
int rlk_script_format(int script, const rlk_args *keys, const rlk_args *args, char **cmd,
                      size_t *len);
/* Appends EVALSHA with arrays instead of rlk_args (for large batches). */
int rlk_script_appendv(rlk_conn *conn, int script, int nkeys, int argc, const char **argv,
                       const size_t *lens);
/* Reads one reply of a pipeline. RLOCK_OK or RLOCK_ECONN (connection now broken). */
int rlk_conn_read(rlk_conn *conn, redisReply **out);
/* Loads script on conn with SCRIPT LOAD and checks the SHA (after a NOSCRIPT in a pipeline). */
int rlk_script_load(rlk_conn *conn, int script);
/* 1 if reply is a NOSCRIPT error reply. */
int rlk_reply_is_noscript(const redisReply *r);

/* Maps a hiredis context error to RLOCK_ECONN with a message naming what was attempted. */
int rlk_conn_error(const redisContext *ctx, const char *what);

#endif
