/*
 * One connection to Redis on rlock's own socket: dialling (TCP, unix, TLS), AUTH and SELECT,
 * sending requests, reading replies (hiredis for RESP only), failures mapped to RLOCK_ECONN or
 * RLOCK_ETLS. Every wait is bounded and no call raises a signal; a function that fails leaves
 * the connection broken (rlk_conn_broken()), to be closed, never reused.
 * docs/internals/connections.md explains the design.
 */
#ifndef RLK_CONN_H
#define RLK_CONN_H

#include <hiredis.h>

#include "context.h"
#include "resp_guard.h"

struct ssl_st;

/* A connection. Its fields belong to conn.c (the pool keeps its idle ones in a list of its own). */
typedef struct rlk_conn {
    int fd;
    struct ssl_st *ssl;     /* the TLS session, NULL for a plain connection */
    pthread_mutex_t ssl_mu; /* serialises the session between a sender and a reader */
    redisReader *reader;    /* hiredis' RESP parser, fed with what the socket gave */
    rlk_resp_guard guard;   /* checks what the socket gave before the parser sees it */
    char *obuf;             /* queued requests, obuf[opos .. olen) not yet written */
    size_t opos, olen, ocap;
    int64_t io_timeout_ms;   /* bound on each write wait and on each reply */
    int64_t sock_timeout_ms; /* SO_RCVTIMEO/SO_SNDTIMEO now set on a blocking socket */
    int blocking;            /* 1: a plain socket in blocking mode, its waits bounded by
                                SO_RCVTIMEO/SO_SNDTIMEO instead of poll() */
    int err;                 /* RLK_CONN_E*, 0 while usable */
    int sys_errno;           /* errno of the failure that broke the connection */
    uint64_t gen;            /* the pool's generation (its master) when it was dialled */
    /* The replica count of the node dialled: a cluster node's, set by its pool; NULL for the
     * client's data node (rlock_client.replicas). */
    rlk_replicas *replicas;
    /* The client whose figures count the commands queued here (rlock_redis_commands_total). */
    rlock_client *client;
} rlk_conn;

/* What broke a connection (rlk_conn.err). */
enum { RLK_CONN_EIO = 1, RLK_CONN_EEOF, RLK_CONN_ETIMEOUT, RLK_CONN_EPROTO, RLK_CONN_ETLS };

/* Where to dial, when it is not the client's URL (a Sentinel's answer, a replica). */
typedef struct rlk_endpoint {
    const char *host; /* TCP host, or NULL when path is set */
    int port;
    const char *path;     /* unix socket path or NULL */
    const char *user;     /* AUTH user or NULL */
    const char *password; /* AUTH password or NULL (no AUTH) */
    int db;               /* SELECT when > 0 */
    int tls;              /* 1 = TLS with the client's TLS settings */
} rlk_endpoint;

/* Puts a connection's socket in blocking mode (plain and TLS alike), its reads and writes then
 * bounded by SO_RCVTIMEO/SO_SNDTIMEO (one system call per read instead of poll() + recv());
 * event-loop reads (rlk_conn_fill) and liveness checks stay non-blocking (MSG_DONTWAIT). */
void rlk_conn_make_blocking(rlk_conn *conn);
/* Changes the read/write timeout (> 0). RLOCK_OK. */
int rlk_conn_set_timeout(rlk_conn *conn, int64_t ms);

/* Sends one command and reads its reply (an error reply is a reply, not a failure). */
int rlk_conn_command(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens,
                     redisReply **out);
/* Queues a command in the output buffer (sent by rlk_conn_flush() or the next read); every
 * command sent goes through here, but for rlk_conn_send()'s, which its caller counts. */
int rlk_conn_append(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens);
/* Writes every queued request, each wait for the socket bounded by the I/O timeout; *done is 1
 * when the output buffer is empty (always, on success). */
int rlk_conn_flush(rlk_conn *conn, int *done);
/* Writes bytes already formatted as a request straight to the connection, bypassing the output
 * buffer (which must be empty): how the subscriber thread sends an armed attempt whose owner
 * reads the reply. The owner must not start reading before this returned: a TLS read holds the
 * session (a mutex) for as long as it waits in the kernel, which would hold the send back until
 * the read timed out. A failure does not mark the connection: the reader's own read fails on
 * the broken socket. */
int rlk_conn_send(rlk_conn *conn, const char *buf, size_t len);
/* Reads one reply, waiting up to the I/O timeout (pipelines: once per queued request). */
int rlk_conn_read(rlk_conn *conn, redisReply **out);

/* Event-loop reading (the subscriber, the RedLock round): the socket to poll, a read of
 * everything that has arrived (never waits), and the next complete reply among what was read
 * (*out NULL when none is complete yet). */
int rlk_conn_fd(const rlk_conn *conn);
int rlk_conn_fill(rlk_conn *conn);
int rlk_conn_next(rlk_conn *conn, redisReply **out);

/* 1 if a failure left the connection unusable. */
int rlk_conn_broken(const rlk_conn *conn);
/* 1 if an idle connection has something to read, which means the server closed it or sent
 * garbage: it must not be reused. (TLS session tickets and other records that carry no data
 * are consumed, not counted.) */
int rlk_conn_dead(const rlk_conn *conn);
/* 1 if the failure that broke the connection proves the request never reached Redis' command
 * processing (a reset or EOF), so that resending an idempotent command is safe; a timeout is not
 * (the server may be slow or paused, and resending doubles the wait). */
int rlk_conn_resendable(const rlk_conn *conn);

#endif
