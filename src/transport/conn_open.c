/*
 * Opening and closing a connection (conn.h): where the client's data node is, the socket
 * (sock.c), TLS when asked (tls.c), then AUTH and SELECT, all within the dial's deadline;
 * closing, and abandoning after fork(). Static helpers are named conn_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "conn_open.h"
#include "error.h"
#include "sock.h"
#include "tls.h"

/* The time left before deadline_ms, at least 1 ms. */
static int64_t conn_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - rlk_now_ms();
    return left < 1 ? 1 : left;
}

/* Runs AUTH or SELECT during the dial, bounded by its deadline. A refusal is RLOCK_EAUTH with
 * Redis' text. */
static int conn_setup_cmd(rlk_conn *conn, int64_t deadline_ms, int argc, const char **argv,
                          const char *shown)
{
    redisReply *r = NULL;
    (void)rlk_conn_set_timeout(conn, conn_left(deadline_ms));
    int rc = rlk_conn_command(conn, argc, argv, NULL, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = rlk_err(RLOCK_EAUTH, "%s refused by Redis: %s", shown, r->str);
    }
    freeReplyObject(r);
    return rc;
}

/* Sends AUTH and SELECT as the endpoint asks. */
static int conn_setup(rlk_conn *conn, const rlk_endpoint *ep, int64_t deadline_ms)
{
    int r = RLOCK_OK;
    if (ep->password != NULL) {
        /* AUTH <user> <password> for an ACL user, AUTH <password> for the default user. */
        const char *argv[3] = {"AUTH", ep->user, ep->password};
        if (ep->user == NULL) {
            argv[1] = ep->password;
        }
        r = conn_setup_cmd(conn, deadline_ms, ep->user == NULL ? 2 : 3, argv, "AUTH");
    }
    if (r == RLOCK_OK && ep->db > 0) {
        char db[16], shown[32];
        snprintf(db, sizeof(db), "%d", ep->db);
        snprintf(shown, sizeof(shown), "SELECT %d", ep->db);
        const char *argv[2] = {"SELECT", db};
        r = conn_setup_cmd(conn, deadline_ms, 2, argv, shown);
    }
    return r;
}

static rlk_conn *conn_new(void)
{
    rlk_conn *conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        return NULL;
    }
    conn->fd = -1;
    conn->reader = redisReaderCreate();
    if (conn->reader == NULL) {
        free(conn);
        return NULL;
    }
    pthread_mutex_init(&conn->ssl_mu, NULL);
    return conn;
}

/* The socket and, when asked, the TLS session on it. */
static int conn_dial(const rlock_client *c, const rlk_endpoint *ep, int64_t deadline_ms,
                     rlk_conn *conn)
{
    int r = ep->path != NULL ? rlk_sock_dial_unix(ep->path, deadline_ms, &conn->fd)
                             : rlk_sock_dial_tcp(ep->host, ep->port, deadline_ms, &conn->fd);
    if (r != RLOCK_OK || !ep->tls) {
        return r;
    }
    if (c->tls == NULL) {
        return rlk_err(RLOCK_ETLS, "TLS asked for, but the client has no TLS settings");
    }
    return rlk_tls_connect(c->tls, conn->fd, ep->host != NULL ? ep->host : "localhost", deadline_ms,
                           &conn->ssl);
}

int rlk_conn_open_at(const rlock_client *c, const rlk_endpoint *ep, int64_t deadline_ms,
                     int64_t io_timeout_ms, rlk_conn **out)
{
    *out = NULL;
    if (deadline_ms - rlk_now_ms() < 1) {
        return rlk_err(RLOCK_ECONN, "%s: no time left within connect_timeout_ms",
                       ep->path != NULL ? "connect (unix socket)" : "connect");
    }
    rlk_conn *conn = conn_new();
    if (conn == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a connection");
    }
    /* The figures are the one part of the client that its layers write (relaxed atomics). */
    conn->client = (rlock_client *)c;
    int r = conn_dial(c, ep, deadline_ms, conn);
    if (r == RLOCK_OK) {
        rlk_conn_make_blocking(conn);
    }
    r = r ? r : conn_setup(conn, ep, deadline_ms);
    if (r != RLOCK_OK) {
        rlk_conn_close(conn);
        return r;
    }
    /* The dial was bounded by the deadline; later reads by the caller's timeout. */
    (void)rlk_conn_set_timeout(conn, io_timeout_ms);
    *out = conn;
    return RLOCK_OK;
}

void rlk_client_endpoint(const rlock_client *c, rlk_endpoint *ep, char *host)
{
    const rlk_url *u = &c->url;
    *ep = (rlk_endpoint){.host = u->host,
                         .port = u->port,
                         .path = u->path,
                         .user = u->user,
                         .password = u->password,
                         .db = u->db,
                         .tls = u->tls};
    /* A cluster client's data node is its home node (cluster.c), recorded the same way. */
    if (u->kind == RLK_URL_SENTINEL || u->kind == RLK_URL_CLUSTER) {
        rlk_client_master(c, host, &ep->port);
        ep->host = host;
    }
}

int rlk_conn_open(const rlock_client *c, int64_t deadline_ms, int64_t io_timeout_ms, rlk_conn **out)
{
    rlk_endpoint ep;
    char host[RLK_HOST_MAX];
    rlk_client_endpoint(c, &ep, host);
    return rlk_conn_open_at(c, &ep, deadline_ms, io_timeout_ms, out);
}

static void conn_free(rlk_conn *conn)
{
    if (conn->fd >= 0) {
        close(conn->fd);
    }
    redisReaderFree(conn->reader);
    free(conn->obuf);
    pthread_mutex_destroy(&conn->ssl_mu);
    free(conn);
}

void rlk_conn_close(rlk_conn *conn)
{
    if (conn == NULL) {
        return;
    }
    rlk_tls_end(conn->ssl, conn->err == 0);
    conn_free(conn);
}

void rlk_conn_abandon(rlk_conn *conn)
{
    if (conn == NULL) {
        return;
    }
    /* The session's state is shared with the parent's copy: a close_notify from here would
     * end the parent's connection too. */
    rlk_tls_end(conn->ssl, 0);
    conn_free(conn);
}
