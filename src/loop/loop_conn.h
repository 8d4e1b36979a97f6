/*
 * One non-blocking connection to Redis driven by the caller's loop (rlock_loop): a unix socket
 * or a TCP address (a host name looked up off the loop) dialled without waiting, TLS when the
 * client has a context, AUTH and SELECT queued first, requests written as the socket takes them,
 * replies parsed by hiredis' reader and handed to the request's callback in order. A connection in
 * pub/sub mode hands pushed messages (and SUBSCRIBE confirmations) to its push callback instead.
 */
#ifndef RLK_LOOP_CONN_H
#define RLK_LOOP_CONN_H

#include <hiredis.h>

#include "rlock_async.h"
#include "url.h"

typedef struct rlk_lconn rlk_lconn;

/* A request's reply: rep (freed by the connection after the call) or, with rep NULL, the
 * RLOCK_E* code of the failure that lost it (RLOCK_ECONN, RLOCK_ECLOSED). */
typedef void (*rlk_lconn_reply_fn)(void *arg, redisReply *rep, int err);
/* A pushed message of a pub/sub connection (an array whose first element names its kind). */
typedef void (*rlk_lconn_push_fn)(void *arg, redisReply *rep);
/* The connection broke (err: RLOCK_ECONN, RLOCK_EAUTH); requests in flight got err already. */
typedef void (*rlk_lconn_down_fn)(void *arg, int err);

typedef struct rlk_lconn_cbs {
    rlk_lconn_push_fn push; /* NULL: not a pub/sub connection */
    rlk_lconn_down_fn down;
    void *arg;
    /* Bounds that break the connection with RLOCK_ECONN: the dial (and AUTH/SELECT), and the
     * wait for each reply from when its request was queued. */
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    const struct rlk_tls *tls; /* the client's TLS context (outlives the connection), or NULL */
} rlk_lconn_cbs;

/* Starts reaching url's host on loop: a unix socket (url->path, never TLS) or a numeric address
 * is dialled at once, a name looked up first (loop_resolve.h); each address in turn; then the
 * TLS handshake when cbs->tls is set. A failure of any step, or no connection within
 * connect_timeout_ms, breaks the connection with its code (RLOCK_ECONN, RLOCK_ETLS with OpenSSL's
 * reason). RLOCK_OK and *out; RLOCK_ECONN when no socket (or lookup) could be started;
 * RLOCK_ENOMEM. */
int rlk_lconn_new(const rlock_loop *loop, const rlk_url *url, const rlk_lconn_cbs *cbs,
                  rlk_lconn **out);
/* With url->host and url->path NULL the connection is parked: requests queue (AUTH and SELECT
 * first) until rlk_lconn_aim() names the host; connect_timeout_ms runs from the creation. */
/* Starts a parked connection towards host:port (a failure breaks it: its down callback runs).
 * A no-op on a connection that is not parked. Call it from a loop callback only. */
void rlk_lconn_aim(rlk_lconn *c, const char *host, int port);
/* 1 while c is parked. */
int rlk_lconn_parked(const rlk_lconn *c);
/* Queues request bytes (a formatted RESP request) with its reply callback (fn NULL: no reply is
 * expected, as for SUBSCRIBE on a pub/sub connection). RLOCK_ECONN on a broken connection. */
int rlk_lconn_send(rlk_lconn *c, const char *buf, size_t len, rlk_lconn_reply_fn fn, void *arg);
/* The same for a command given as arguments. */
int rlk_lconn_command(rlk_lconn *c, int argc, const char *const *argv, const size_t *lens,
                      rlk_lconn_reply_fn fn, void *arg);
/* 1 while the connection can take requests. */
int rlk_lconn_ok(const rlk_lconn *c);
/* 1 once a reply came on it: the server answered, the dial was not in vain. */
int rlk_lconn_replied(const rlk_lconn *c);
/* Writes what is queued now without waiting, failing nothing, then ends the sending side and
 * reads away what has arrived, so that the close that follows sends no reset: the last
 * requests of a client being freed. What the socket does not take at once is dropped. */
void rlk_lconn_flush(rlk_lconn *c);
/* Fails every request in flight with err (their callbacks run now), then frees the connection,
 * at once or, when called from inside one of its own callbacks, when that callback returns. */
void rlk_lconn_free(rlk_lconn *c, int err);

#endif
