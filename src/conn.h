/*
 * One connection to Redis: dialling with the client's URL, timeouts, AUTH and SELECT, sending
 * requests, reading replies, and mapping failures to RLOCK_ECONN with a message. The pool, the
 * subscriber, the watchdog and armed attempts talk to Redis only through these functions, so
 * that the transport under them (hiredis' blocking context today) can be replaced in one file.
 *
 * Every function that fails sets the last error (rlk_err) and leaves the connection broken
 * (rlk_conn_broken() != 0): it must then be closed, never reused.
 */
#ifndef RLK_CONN_H
#define RLK_CONN_H

#include <hiredis.h>

#include "client.h"

/* A connection. ctx belongs to conn.c; the RedLock round (lock_multi.c) still reaches into it
 * for its non-blocking multi-server I/O, the only code outside this file that does. */
typedef struct rlk_conn {
    redisContext *ctx;
    struct rlk_conn *next_idle; /* the pool's list of idle connections */
    int sys_errno;              /* errno of the failure that broke the connection */
} rlk_conn;

/* Dials a connection: connect, AUTH and SELECT together are bounded by deadline_ms (a monotonic
 * time, rlk_now_ms()). Reads and writes afterwards time out after io_timeout_ms (> 0).
 * RLOCK_OK, RLOCK_ECONN, RLOCK_EAUTH or RLOCK_ENOMEM. */
int rlk_conn_open(const rlock_client *c, int64_t deadline_ms, int64_t io_timeout_ms,
                  rlk_conn **out);
void rlk_conn_close(rlk_conn *conn);
/* Frees a connection inherited across fork(): closes the fd, frees memory, writes NOTHING
 * (no QUIT, no TLS close_notify). */
void rlk_conn_abandon(rlk_conn *conn);

/* Changes the read/write timeout (> 0). RLOCK_OK or RLOCK_ECONN. */
int rlk_conn_set_timeout(rlk_conn *conn, int64_t ms);

/* Sends one command and reads its reply (an error reply is a reply, not a failure). */
int rlk_conn_command(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens,
                     redisReply **out);
/* Queues a command in the output buffer (sent by rlk_conn_flush() or the next read). */
int rlk_conn_append(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens);
/* Writes queued requests; *done is 1 when the output buffer is empty. */
int rlk_conn_flush(rlk_conn *conn, int *done);
/* Writes bytes already formatted as a request straight to the socket, bypassing the output
 * buffer (which must be empty). Safe while another thread blocks reading the same connection:
 * how the subscriber thread sends an armed attempt whose owner reads the reply. */
int rlk_conn_send(rlk_conn *conn, const char *buf, size_t len);
/* Reads one reply, blocking up to the read timeout (pipelines: once per queued request). */
int rlk_conn_read(rlk_conn *conn, redisReply **out);

/* Event-loop reading (the subscriber): the socket to poll, one read of what arrived, and the
 * next complete reply among what was read (*out NULL when none is complete yet). */
int rlk_conn_fd(const rlk_conn *conn);
int rlk_conn_fill(rlk_conn *conn);
int rlk_conn_next(rlk_conn *conn, redisReply **out);

/* 1 if a failure left the connection unusable. */
int rlk_conn_broken(const rlk_conn *conn);
/* 1 if an idle connection has something to read, which means the server closed it or sent
 * garbage: it must not be reused. */
int rlk_conn_dead(const rlk_conn *conn);
/* 1 if the failure that broke the connection proves the request never reached Redis' command
 * processing (a reset or EOF), so that resending an idempotent command is safe; a timeout is not
 * (the server may be slow or paused, and resending doubles the wait). */
int rlk_conn_resendable(const rlk_conn *conn);

/* Maps a hiredis context error to RLOCK_ECONN (RLOCK_ENOMEM for NULL) with a message naming
 * what was attempted. For code that still holds a redisContext (the RedLock round). */
int rlk_conn_error(const redisContext *ctx, const char *what);

#endif
