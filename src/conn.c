/*
 * One connection to Redis over a blocking hiredis context (see conn.h). Failures are mapped here,
 * once, to RLOCK_ECONN with what was attempted and why; the errno of the failure is kept with
 * the connection because the caller decides later whether a resend is safe.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "conn.h"

static struct timeval rlk_conn_tv(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

static int rlk_ctx_error(const redisContext *ctx, int sys_errno, const char *what)
{
    if (ctx == NULL) {
        return rlk_err(RLOCK_ENOMEM, "%s: cannot allocate a connection", what);
    }
    if (ctx->err == REDIS_ERR_IO && (sys_errno == EAGAIN || sys_errno == EWOULDBLOCK)) {
        return rlk_err(RLOCK_ECONN, "%s: timed out waiting for Redis", what);
    }
    return rlk_err(RLOCK_ECONN, "%s: %s", what, ctx->errstr[0] ? ctx->errstr : "I/O error");
}

int rlk_conn_error(const redisContext *ctx, const char *what)
{
    return rlk_ctx_error(ctx, errno, what);
}

/* Records the failure that broke conn (errno first: formatting may change it). */
static int rlk_conn_fail(rlk_conn *conn, const char *what)
{
    conn->sys_errno = errno;
    if (conn->ctx->err == 0) {
        /* A failure hiredis did not record (a raw send): make the context say it is broken. */
        conn->ctx->err = REDIS_ERR_IO;
        snprintf(conn->ctx->errstr, sizeof(conn->ctx->errstr), "%s", strerror(conn->sys_errno));
    }
    return rlk_ctx_error(conn->ctx, conn->sys_errno, what);
}

/* The time left before deadline_ms, at least 1 ms: hiredis reads a zero timeout as "none". */
static int64_t rlk_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - rlk_now_ms();
    return left < 1 ? 1 : left;
}

/* Runs AUTH or SELECT during the handshake, bounded by the dial's deadline. A refusal is
 * RLOCK_EAUTH with Redis' text. */
static int rlk_handshake_cmd(rlk_conn *conn, int64_t deadline_ms, int argc, const char **argv,
                             const char *shown)
{
    redisReply *r = NULL;
    int rc = rlk_conn_set_timeout(conn, rlk_left(deadline_ms));
    rc = rc ? rc : rlk_conn_command(conn, argc, argv, NULL, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = rlk_err(RLOCK_EAUTH, "%s refused by Redis: %s", shown, r->str);
    }
    freeReplyObject(r);
    return rc;
}

/* Sends AUTH and SELECT as the URL asks. */
static int rlk_handshake(const rlock_client *c, rlk_conn *conn, int64_t deadline_ms)
{
    const rlk_url *u = &c->url;
    int r = RLOCK_OK;
    if (u->password != NULL) {
        /* AUTH <user> <password> for an ACL user, AUTH <password> for the default user. */
        const char *argv[3] = {"AUTH", u->user, u->password};
        if (u->user == NULL) {
            argv[1] = u->password;
        }
        r = rlk_handshake_cmd(conn, deadline_ms, u->user == NULL ? 2 : 3, argv, "AUTH");
    }
    if (r == RLOCK_OK && u->db != 0) {
        char db[16], shown[32];
        snprintf(db, sizeof(db), "%d", u->db);
        snprintf(shown, sizeof(shown), "SELECT %d", u->db);
        const char *argv[2] = {"SELECT", db};
        r = rlk_handshake_cmd(conn, deadline_ms, 2, argv, shown);
    }
    return r;
}

int rlk_conn_open(const rlock_client *c, int64_t deadline_ms, int64_t io_timeout_ms, rlk_conn **out)
{
    *out = NULL;
    const char *what = c->url.is_unix ? "connect (unix socket)" : "connect";
    if (deadline_ms - rlk_now_ms() < 1) {
        return rlk_err(RLOCK_ECONN, "%s: no time left within connect_timeout_ms", what);
    }
    rlk_conn *conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a connection");
    }
    struct timeval ctv = rlk_conn_tv(rlk_left(deadline_ms));
    conn->ctx = c->url.is_unix ? redisConnectUnixWithTimeout(c->url.path, ctv)
                               : redisConnectWithTimeout(c->url.host, c->url.port, ctv);
    if (conn->ctx == NULL || conn->ctx->err) {
        int r = rlk_ctx_error(conn->ctx, errno, what);
        rlk_conn_close(conn);
        return r;
    }
    if (!c->url.is_unix) {
        redisEnableKeepAlive(conn->ctx);
    }
    int r = rlk_handshake(c, conn, deadline_ms);
    if (r == RLOCK_OK) {
        /* The handshake was bounded by the deadline; later reads by the caller's timeout. */
        r = rlk_conn_set_timeout(conn, io_timeout_ms);
    }
    if (r != RLOCK_OK) {
        rlk_conn_close(conn);
        return r;
    }
    *out = conn;
    return RLOCK_OK;
}

void rlk_conn_close(rlk_conn *conn)
{
    if (conn == NULL) {
        return;
    }
    if (conn->ctx != NULL) {
        redisFree(conn->ctx);
    }
    free(conn);
}

void rlk_conn_abandon(rlk_conn *conn)
{
    if (conn == NULL) {
        return;
    }
    /* The socket is shared with the parent process, which goes on using it: closing our copy of
     * the descriptor is all the child may do. The descriptor is closed here, not by the context,
     * so that no transport (a TLS shutdown, say) ever gets a chance to write on it. */
    if (conn->ctx != NULL && conn->ctx->fd >= 0) {
        close(conn->ctx->fd);
        conn->ctx->fd = -1;
    }
    rlk_conn_close(conn);
}

int rlk_conn_set_timeout(rlk_conn *conn, int64_t ms)
{
    return redisSetTimeout(conn->ctx, rlk_conn_tv(ms)) == REDIS_OK
               ? RLOCK_OK
               : rlk_conn_fail(conn, "setting the command timeout");
}

int rlk_conn_command(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens,
                     redisReply **out)
{
    *out = redisCommandArgv(conn->ctx, argc, (const char **)argv, lens);
    return *out != NULL ? RLOCK_OK : rlk_conn_fail(conn, argc > 0 ? argv[0] : "command");
}

int rlk_conn_append(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens)
{
    if (redisAppendCommandArgv(conn->ctx, argc, (const char **)argv, lens) != REDIS_OK) {
        return rlk_conn_fail(conn, "queueing a request");
    }
    return RLOCK_OK;
}

int rlk_conn_flush(rlk_conn *conn, int *done)
{
    *done = 0;
    return redisBufferWrite(conn->ctx, done) == REDIS_OK ? RLOCK_OK
                                                         : rlk_conn_fail(conn, "sending");
}

int rlk_conn_send(rlk_conn *conn, const char *buf, size_t len)
{
    while (len > 0) {
        /* MSG_NOSIGNAL: a peer that closed the connection must not raise SIGPIPE. */
        ssize_t n = send(conn->ctx->fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            /* The context is not marked: the owner may be reading it in another thread, and its
             * read fails on the broken socket by itself. */
            return rlk_err(RLOCK_ECONN, "sending a request: %s", strerror(errno));
        }
        buf += n;
        len -= (size_t)n;
    }
    return RLOCK_OK;
}

int rlk_conn_read(rlk_conn *conn, redisReply **out)
{
    void *rep = NULL;
    *out = NULL;
    if (redisGetReply(conn->ctx, &rep) != REDIS_OK || rep == NULL) {
        return rlk_conn_fail(conn, "reading a reply");
    }
    *out = rep;
    return RLOCK_OK;
}

int rlk_conn_fd(const rlk_conn *conn)
{
    return conn->ctx->fd;
}

int rlk_conn_fill(rlk_conn *conn)
{
    if (redisBufferRead(conn->ctx) != REDIS_OK) {
        return rlk_conn_fail(conn, "reading");
    }
    return RLOCK_OK;
}

int rlk_conn_next(rlk_conn *conn, redisReply **out)
{
    void *rep = NULL;
    *out = NULL;
    if (redisGetReplyFromReader(conn->ctx, &rep) != REDIS_OK) {
        return rlk_conn_fail(conn, "parsing a reply");
    }
    *out = rep;
    return RLOCK_OK;
}

int rlk_conn_broken(const rlk_conn *conn)
{
    return conn->ctx->err != 0;
}

int rlk_conn_dead(const rlk_conn *conn)
{
    struct pollfd pfd = {.fd = conn->ctx->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) != 0;
}

int rlk_conn_resendable(const rlk_conn *conn)
{
    if (conn->ctx->err == REDIS_ERR_EOF) {
        return 1;
    }
    return conn->ctx->err == REDIS_ERR_IO &&
           (conn->sys_errno == ECONNRESET || conn->sys_errno == EPIPE);
}
