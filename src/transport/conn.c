/*
 * One connection to Redis on rlock's own socket (see conn.h). hiredis parses replies (its
 * reader) and formats commands; the bytes move here, through TLS when the connection has a
 * session, every wait bounded: by poll() with a deadline, or on a blocking socket by the
 * kernel's SO_RCVTIMEO/SO_SNDTIMEO set from the same deadline. Failures are
 * mapped here, once, to RLOCK_ECONN (RLOCK_ETLS for TLS protocol failures) with what was
 * attempted and why; the kind of failure stays with the connection because the caller decides
 * later whether a resend is safe. Static helpers are named conn_*.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "conn.h"
#include "error.h"
#include "resp_format.h"
#include "sock.h"
#include "tls.h"

/* Bytes read from the socket at once (a TLS record holds at most 16 KiB of data). */
#define CONN_READ_CHUNK 16384

/* Records the failure that broke conn and reports it. */
static int conn_fail(rlk_conn *conn, int kind, const char *what, const char *why)
{
    int sys_errno = errno;
    conn->err = kind;
    conn->sys_errno = kind == RLK_CONN_EIO ? sys_errno : 0;
    switch (kind) {
    case RLK_CONN_ETIMEOUT:
        return rlk_err(RLOCK_ECONN, "%s: timed out waiting for Redis", what);
    case RLK_CONN_EEOF:
        return rlk_err(RLOCK_ECONN, "%s: connection closed by the server", what);
    case RLK_CONN_ETLS:
        return rlk_err(RLOCK_ETLS, "%s: TLS: %s", what, why);
    case RLK_CONN_EPROTO:
        return rlk_err(RLOCK_ECONN, "%s: %s", what, why);
    default:
        return rlk_err(RLOCK_ECONN, "%s: %s", what, strerror(sys_errno));
    }
}

/* Waits until fd is ready for events or deadline_ms passed: 1 ready (or failed: the next I/O
 * says how), 0 timed out. */
static int conn_wait(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - rlk_now_ms();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, (int)(left > INT_MAX ? INT_MAX : left));
        if (n != 0 && !(n < 0 && errno == EINTR)) {
            return 1;
        }
        if (n == 0) {
            return 0;
        }
    }
}

/* Sets the kernel's bound on each blocking read and write of a socket: a blocking recv() is one
 * system call where poll() + recv() are two, and every pooled command waits for a reply. */
static void conn_sock_timeout(rlk_conn *conn, int64_t ms)
{
    if (!conn->blocking || ms == conn->sock_timeout_ms) {
        return;
    }
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    (void)setsockopt(conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(conn->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    conn->sock_timeout_ms = ms;
}

void rlk_conn_make_blocking(rlk_conn *conn)
{
    int fl = fcntl(conn->fd, F_GETFL);
    if (fl >= 0 && fcntl(conn->fd, F_SETFL, fl & ~O_NONBLOCK) == 0) {
        conn->blocking = 1;
        conn_sock_timeout(conn, conn->io_timeout_ms > 0 ? conn->io_timeout_ms : 1);
    }
}

/* One read or write on the transport: > 0 bytes, 0 would block (*events to poll for), < 0
 * minus an RLK_CONN_E* kind. On a blocking socket a call that may block (may_block) waits in
 * the kernel, bounded by conn_sock_timeout(), and "would block" then means that bound passed
 * (a plain call says so, -RLK_CONN_ETIMEOUT; a TLS one returns 0 and the caller's deadline
 * says it); one that may not (the subscriber's event loop) says so with MSG_DONTWAIT. */
static ssize_t conn_io_plain(rlk_conn *conn, int write, int may_block, char *buf, size_t n,
                             short *events)
{
    int wait = conn->blocking && may_block;
    int flags = wait ? 0 : MSG_DONTWAIT;
    ssize_t r =
        write ? send(conn->fd, buf, n, flags | MSG_NOSIGNAL) : recv(conn->fd, buf, n, flags);
    if (r > 0) {
        return r;
    }
    if (r == 0) {
        return write ? 0 : -RLK_CONN_EEOF;
    }
    if (errno == EINTR) {
        *events = write ? POLLOUT : POLLIN;
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *events = write ? POLLOUT : POLLIN;
        return wait ? -RLK_CONN_ETIMEOUT : 0;
    }
    return -RLK_CONN_EIO;
}

static ssize_t conn_io(rlk_conn *conn, int write, int may_block, char *buf, size_t n, short *events,
                       char *why, size_t whylen)
{
    if (conn->ssl != NULL) {
        /* The session is shared by a reader and an armed sender, so its calls are serialised
         * (never both at once in practice: an armed attempt's reader waits for the send). */
        int wait = conn->blocking && may_block;
        pthread_mutex_lock(&conn->ssl_mu);
        ssize_t r = write ? rlk_tls_write(conn->ssl, wait, buf, n, events, why, whylen)
                          : rlk_tls_read(conn->ssl, wait, buf, n, events, why, whylen);
        pthread_mutex_unlock(&conn->ssl_mu);
        return r;
    }
    return conn_io_plain(conn, write, may_block, buf, n, events);
}

/* Writes buf[0 .. len) whole, each wait bounded by the I/O timeout. RLOCK_OK, or the failure's
 * kind as a negative number with why filled (the caller decides whether to mark conn). */
static int conn_write_all(rlk_conn *conn, const char *buf, size_t len, size_t *written, char *why,
                          size_t whylen)
{
    int64_t deadline = 0;
    *written = 0;
    while (*written < len) {
        short ev = POLLOUT;
        ssize_t n = conn_io(conn, 1, 1, (char *)buf + *written, len - *written, &ev, why, whylen);
        if (n < 0) {
            return (int)n;
        }
        *written += (size_t)n;
        if (n == 0) {
            deadline = deadline ? deadline : rlk_add_sat(rlk_now_ms(), conn->io_timeout_ms);
            if (!conn_wait(conn->fd, ev, deadline)) {
                return -RLK_CONN_ETIMEOUT;
            }
        }
    }
    return RLOCK_OK;
}

/* A TLS server that refuses the session after the handshake (a client certificate it requires,
 * checked once TLS 1.3 has finished) sends an alert and closes; a write may meet the reset before
 * any read met the alert. The alert, when it is there, is the better reason. */
static int conn_tls_refusal(rlk_conn *conn, int r, char *why, size_t whylen)
{
    if (conn->ssl == NULL || (r != -RLK_CONN_EIO && r != -RLK_CONN_EEOF)) {
        return r;
    }
    int saved = errno;
    char b[1];
    short ev = 0;
    pthread_mutex_lock(&conn->ssl_mu);
    ssize_t n = rlk_tls_read(conn->ssl, 0, b, sizeof(b), &ev, why, whylen);
    pthread_mutex_unlock(&conn->ssl_mu);
    errno = saved;
    return n == -RLK_CONN_ETLS ? (int)n : r;
}

int rlk_conn_flush(rlk_conn *conn, int *done)
{
    char why[256] = "";
    size_t written = 0;
    *done = 0;
    int r = conn_write_all(conn, conn->obuf + conn->opos, conn->olen - conn->opos, &written, why,
                           sizeof(why));
    conn->opos += written;
    if (r != RLOCK_OK) {
        r = conn_tls_refusal(conn, r, why, sizeof(why));
        return conn_fail(conn, -r, "sending", why);
    }
    conn->opos = conn->olen = 0;
    *done = 1;
    return RLOCK_OK;
}

int rlk_conn_send(rlk_conn *conn, const char *buf, size_t len)
{
    char why[256] = "";
    size_t written = 0;
    int r = conn_write_all(conn, buf, len, &written, why, sizeof(why));
    if (r == -RLK_CONN_ETIMEOUT) {
        return rlk_err(RLOCK_ECONN, "sending a request: timed out");
    }
    if (r != RLOCK_OK) {
        return rlk_err(r == -RLK_CONN_ETLS ? RLOCK_ETLS : RLOCK_ECONN, "sending a request: %s",
                       r == -RLK_CONN_ETLS ? why : strerror(errno));
    }
    return RLOCK_OK;
}

/* Queues a formatted request (taken over: freed here). */
static int conn_queue(rlk_conn *conn, char *cmd, size_t len)
{
    if (conn->olen == 0) {
        /* The usual case, one request at a time: its buffer becomes the output buffer. */
        free(conn->obuf);
        conn->obuf = cmd;
        conn->opos = 0;
        conn->olen = conn->ocap = len;
        return RLOCK_OK;
    }
    if (conn->olen + len > conn->ocap) {
        size_t cap = (conn->olen + len) * 2;
        char *p = realloc(conn->obuf, cap);
        if (p == NULL) {
            free(cmd);
            return rlk_err(RLOCK_ENOMEM, "cannot queue a request");
        }
        conn->obuf = p;
        conn->ocap = cap;
    }
    memcpy(conn->obuf + conn->olen, cmd, len);
    conn->olen += len;
    free(cmd);
    return RLOCK_OK;
}

int rlk_conn_append(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens)
{
    char *cmd = NULL;
    long long n = rlk_resp_format(argc, argv, lens, &cmd);
    if (n < 0 || cmd == NULL) {
        conn->err = RLK_CONN_EPROTO;
        return rlk_err(RLOCK_ENOMEM, "cannot format a request");
    }
    int r = conn_queue(conn, cmd, (size_t)n);
    if (r != RLOCK_OK) {
        conn->err = RLK_CONN_EPROTO;
    } else if (conn->client != NULL) {
        rlk_obs_count(conn->client, RLK_CNT_REDIS_COMMANDS);
    }
    return r;
}

/* Reads what the transport has (one read; *events says what to wait for when nothing came) and
 * feeds the reply parser. > 0 bytes, 0 nothing yet, < 0 failed (conn marked). */
static ssize_t conn_read_some(rlk_conn *conn, int may_block, short *events, const char *what)
{
    char buf[CONN_READ_CHUNK];
    char why[256] = "";
    ssize_t n = conn_io(conn, 0, may_block, buf, sizeof(buf), events, why, sizeof(why));
    if (n < 0) {
        return conn_fail(conn, (int)-n, what, why);
    }
    if (n > 0 && rlk_resp_guard_scan(&conn->guard, buf, (size_t)n) != RLOCK_OK) {
        /* A reply too large to be Redis' (or no RESP at all): never fed to the parser, which
         * would allocate what the header announces. */
        conn->err = RLK_CONN_EPROTO;
        conn->sys_errno = 0;
        return RLOCK_EPROTO;
    }
    if (n > 0 && redisReaderFeed(conn->reader, buf, (size_t)n) != REDIS_OK) {
        return conn_fail(conn, RLK_CONN_EPROTO, what, "cannot buffer a reply");
    }
    return n;
}

int rlk_conn_next(rlk_conn *conn, redisReply **out)
{
    void *rep = NULL;
    *out = NULL;
    if (redisReaderGetReply(conn->reader, &rep) != REDIS_OK) {
        char why[160];
        snprintf(why, sizeof(why), "bad reply: %s", conn->reader->errstr);
        return conn_fail(conn, RLK_CONN_EPROTO, "parsing a reply", why);
    }
    *out = rep;
    return RLOCK_OK;
}

int rlk_conn_read(rlk_conn *conn, redisReply **out)
{
    *out = NULL;
    if (conn->err != 0) {
        return rlk_err(RLOCK_ECONN, "reading a reply: the connection is broken");
    }
    int done = 0;
    int r = conn->olen > conn->opos ? rlk_conn_flush(conn, &done) : RLOCK_OK;
    int64_t deadline = 0;
    short ev = POLLIN;
    while (r == RLOCK_OK && (r = rlk_conn_next(conn, out)) == RLOCK_OK && *out == NULL) {
        deadline = deadline ? deadline : rlk_add_sat(rlk_now_ms(), conn->io_timeout_ms);
        if (conn->blocking) {
            /* The kernel waits; a reply in several pieces shares one bound. */
            int64_t left = deadline - rlk_now_ms();
            if (left <= 0) {
                return conn_fail(conn, RLK_CONN_ETIMEOUT, "reading a reply", NULL);
            }
            conn_sock_timeout(conn, left < conn->io_timeout_ms ? left : conn->io_timeout_ms);
        } else if (conn->ssl == NULL || rlk_tls_pending(conn->ssl) == 0) {
            /* Bytes a TLS session already decrypted are invisible to poll(). */
            if (!conn_wait(conn->fd, ev, deadline)) {
                return conn_fail(conn, RLK_CONN_ETIMEOUT, "reading a reply", NULL);
            }
        }
        ev = POLLIN;
        ssize_t n = conn_read_some(conn, 1, &ev, "reading a reply");
        r = n < 0 ? (int)n : RLOCK_OK;
    }
    return r;
}

int rlk_conn_command(rlk_conn *conn, int argc, const char *const *argv, const size_t *lens,
                     redisReply **out)
{
    *out = NULL;
    if (conn->err != 0) {
        return rlk_err(RLOCK_ECONN, "%s: the connection is broken", argc > 0 ? argv[0] : "command");
    }
    int r = rlk_conn_append(conn, argc, argv, lens);
    return r ? r : rlk_conn_read(conn, out);
}

int rlk_conn_fill(rlk_conn *conn)
{
    /* Drains what has arrived: a TLS read returns one record at a time, and the rest may sit
     * in the kernel where the next poll() would see it, or inside the session where it would
     * not. A short plain read means the socket is empty. */
    for (;;) {
        short ev = POLLIN;
        ssize_t n = conn_read_some(conn, 0, &ev, "reading");
        if (n <= 0 || (conn->ssl == NULL && n < CONN_READ_CHUNK)) {
            return n < 0 ? (int)n : RLOCK_OK;
        }
    }
}

int rlk_conn_fd(const rlk_conn *conn)
{
    return conn->fd;
}

int rlk_conn_set_timeout(rlk_conn *conn, int64_t ms)
{
    conn->io_timeout_ms = ms > 0 ? ms : 1;
    conn_sock_timeout(conn, conn->io_timeout_ms);
    return RLOCK_OK;
}

int rlk_conn_broken(const rlk_conn *conn)
{
    return conn->err != 0;
}

int rlk_conn_dead(const rlk_conn *conn)
{
    struct pollfd pfd = {.fd = conn->fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) == 0) {
        return 0;
    }
    if (conn->ssl == NULL) {
        return 1;
    }
    /* TLS 1.3 servers send session tickets after the handshake: records without data that an
     * idle connection may still hold. Reading consumes them; only data, an alert or the end
     * of the stream is a sign of death. No other thread uses an idle connection. */
    char b[1];
    char why[64];
    short ev = 0;
    return rlk_tls_read(conn->ssl, 0, b, sizeof(b), &ev, why, sizeof(why)) != 0;
}

int rlk_conn_resendable(const rlk_conn *conn)
{
    if (conn->err == RLK_CONN_EEOF) {
        return 1;
    }
    return conn->err == RLK_CONN_EIO && (conn->sys_errno == ECONNRESET || conn->sys_errno == EPIPE);
}
