/*
 * A non-blocking connection on the caller's loop (loop_conn.h). Writes happen only from the
 * loop's readiness callback, never inside rlk_lconn_send(), so that no failure (and so no
 * caller's callback) ever runs on the stack of the call that queued a request. A unix socket is
 * dialled directly; a host name is looked up first (loop_resolve.c), each address is tried in
 * turn, and a TLS connection runs its handshake before anything is written; a TLS read may wait for
 * the socket to be writable and a write for it to be readable, so the watched events follow what
 * OpenSSL last asked for.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <poll.h>

#include "conn.h"
#include "error.h"
#include "loop_conn.h"
#include "loop_resolve.h"
#include "resp_format.h"
#include "resp_guard.h"
#include "tls.h"

/* A request waiting for its reply. */
typedef struct lconn_req {
    struct lconn_req *next;
    rlk_lconn_reply_fn fn;
    void *arg;
    int64_t due; /* monotonic ms by which its reply must have come */
} lconn_req;

/* PARKED: no address yet (a Sentinel deployment's master not found yet), requests queue. */
enum { LCONN_PARKED, LCONN_RESOLVING, LCONN_DIALLING, LCONN_HANDSHAKE, LCONN_UP, LCONN_BROKEN };

struct rlk_lconn {
    /* A copy: a deferred free runs after the client's state (and its copy) may be gone. */
    rlock_loop loop;
    rlk_lconn_cbs cbs;
    int fd;
    void *io;
    int state;
    int events; /* what io watches now */
    redisReader *reader;
    rlk_resp_guard guard; /* checks what the socket gave before the reader sees it */
    char *obuf;           /* obuf[opos .. olen) not yet written */
    size_t opos, olen, ocap;
    lconn_req *head, *tail;
    void *timer;      /* the dial's, then the oldest request's time-out */
    int64_t dial_due; /* monotonic ms */
    int depth;        /* callbacks of this connection running now */
    int free_wanted;  /* rlk_lconn_free() was called inside one of them */
    int replied;      /* a reply (or pushed message) was read */
    char *host;       /* for the lookup, SNI and the certificate's name check */
    char *path;       /* a unix socket's path (unix://), else NULL */
    int port;
    rlk_lresolve *res;             /* the name lookup under way, else NULL */
    struct addrinfo *ai, *ai_next; /* the host's addresses; the next one to try */
    struct ssl_st *ssl;            /* TLS session (cbs.tls set), from the handshake on */
    int hs_events;                 /* what the handshake waits for */
    int rd_wants_write;            /* the last SSL_read waits for the socket to be writable */
    int wr_wants_read;             /* the last SSL_write waits for it to be readable */
};

static void lconn_watch(rlk_lconn *c)
{
    int ev = 0;
    if (c->state == LCONN_DIALLING) {
        ev = RLOCK_LOOP_WRITE;
    } else if (c->state == LCONN_HANDSHAKE) {
        ev = c->hs_events;
    } else if (c->state == LCONN_UP) {
        int out = c->olen > c->opos && !c->wr_wants_read;
        ev = RLOCK_LOOP_READ | (out || c->rd_wants_write ? RLOCK_LOOP_WRITE : 0);
    }
    if (ev != c->events && c->io != NULL) {
        c->events = ev;
        (void)c->loop.io_set(c->io, ev);
    }
}

/* Starts the timer for the dial or the oldest request in flight (none: stopped). */
static void lconn_arm(rlk_lconn *c)
{
    int64_t due = INT64_MAX;
    if (c->state < LCONN_UP) {
        due = c->dial_due;
    } else if (c->state == LCONN_UP && c->head != NULL) {
        due = c->head->due;
    }
    if (c->timer == NULL) {
        return;
    }
    if (due == INT64_MAX) {
        c->loop.timer_stop(c->timer);
        return;
    }
    int64_t left = due - rlk_now_ms();
    (void)c->loop.timer_start(c->timer, left < 0 ? 0 : left);
}

/* Fails every request in flight with err, oldest first. */
static void lconn_fail_all(rlk_lconn *c, int err)
{
    while (c->head != NULL) {
        lconn_req *q = c->head;
        c->head = q->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        if (q->fn != NULL) {
            q->fn(q->arg, NULL, err);
        }
        free(q);
    }
}

static void lconn_release(rlk_lconn *c)
{
    rlk_lresolve_cancel(c->res);
    rlk_tls_end(c->ssl, c->state == LCONN_UP);
    if (c->ai != NULL) {
        freeaddrinfo(c->ai);
    }
    free(c->host);
    free(c->path);
    if (c->io != NULL) {
        c->loop.io_free(c->io);
    }
    if (c->timer != NULL) {
        c->loop.timer_free(c->timer);
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->reader != NULL) {
        redisReaderFree(c->reader);
    }
    free(c->obuf);
    free(c);
}

/* Marks the connection broken, fails what was in flight and tells the owner once. */
static void lconn_break(rlk_lconn *c, int err)
{
    if (c->state == LCONN_BROKEN) {
        return;
    }
    c->state = LCONN_BROKEN;
    lconn_watch(c);
    lconn_fail_all(c, err);
    if (c->cbs.down != NULL && !c->free_wanted) {
        c->cbs.down(c->cbs.arg, err);
    }
}

static int lconn_append(rlk_lconn *c, const char *buf, size_t len)
{
    if (c->olen + len > c->ocap) {
        size_t cap = c->ocap < 4096 ? 4096 : c->ocap;
        while (cap < c->olen + len) {
            cap *= 2;
        }
        char *p = realloc(c->obuf, cap);
        if (p == NULL) {
            return rlk_err(RLOCK_ENOMEM, "out of memory queueing a request");
        }
        c->obuf = p;
        c->ocap = cap;
    }
    memcpy(c->obuf + c->olen, buf, len);
    c->olen += len;
    return RLOCK_OK;
}

/* A failed TLS read or write in words: RLOCK_ETLS with OpenSSL's reason, else RLOCK_ECONN. */
static int lconn_tls_err(ssize_t n, const char *why, const char *what)
{
    if (n == -RLK_CONN_ETLS) {
        return rlk_err(RLOCK_ETLS, "TLS %s failed: %s", what, why);
    }
    if (n == -RLK_CONN_EEOF) {
        return rlk_err(RLOCK_ECONN, "Redis closed the connection");
    }
    return rlk_err(RLOCK_ECONN, "TLS %s failed (errno %d)", what, errno);
}

/* Moves some bytes to the socket: > 0 how many, 0 it would block, < 0 an RLOCK_E* code. */
static ssize_t lconn_send_some(rlk_lconn *c, const char *buf, size_t len)
{
    if (c->ssl != NULL) {
        short ev = 0;
        char why[160];
        ssize_t n = rlk_tls_write(c->ssl, 0, buf, len, &ev, why, sizeof(why));
        c->wr_wants_read = n == 0 && ev == POLLIN;
        return n >= 0 ? n : lconn_tls_err(n, why, "write");
    }
    for (;;) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
            return n >= 0 ? n : 0;
        }
        if (errno != EINTR) {
            return rlk_err(RLOCK_ECONN, "write to Redis failed (errno %d)", errno);
        }
    }
}

/* Takes some bytes from the socket: > 0 how many, 0 none yet, < 0 an RLOCK_E* code (the end of
 * the stream included). */
static ssize_t lconn_recv_some(rlk_lconn *c, char *buf, size_t len)
{
    if (c->ssl != NULL) {
        short ev = 0;
        char why[160];
        ssize_t n = rlk_tls_read(c->ssl, 0, buf, len, &ev, why, sizeof(why));
        c->rd_wants_write = n == 0 && ev == POLLOUT;
        return n >= 0 ? n : lconn_tls_err(n, why, "read");
    }
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, 0);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
            return n > 0 ? n : 0;
        }
        if (n == 0 || errno != EINTR) {
            return rlk_err(RLOCK_ECONN, "Redis closed the connection");
        }
    }
}

/* The write buffer once written: empty, and given back when a burst grew it past 64 KiB (a
 * client with many pending waits would otherwise keep the burst's size for good). */
static void lconn_written(rlk_lconn *c)
{
    c->opos = c->olen = 0;
    if (c->ocap > 65536) {
        free(c->obuf);
        c->obuf = NULL;
        c->ocap = 0;
    }
}

static void lconn_write(rlk_lconn *c)
{
    while (c->opos < c->olen) {
        ssize_t n = lconn_send_some(c, c->obuf + c->opos, c->olen - c->opos);
        if (n < 0) {
            lconn_break(c, (int)n);
        }
        if (n <= 0) {
            return;
        }
        c->opos += (size_t)n;
    }
    lconn_written(c);
}

/* A pushed message: a pub/sub kind (classic or sharded), or on a pub/sub connection an error
 * no request waits for (a sharded SSUBSCRIBE's MOVED: the subscription requests read no reply). */
static int lconn_is_push(const rlk_lconn *c, const redisReply *r)
{
    static const char *const kinds[] = {"message",  "subscribe",  "unsubscribe",
                                        "pmessage", "psubscribe", "punsubscribe",
                                        "smessage", "ssubscribe", "sunsubscribe"};
    if (c->cbs.push != NULL && r->type == REDIS_REPLY_ERROR && c->head == NULL) {
        return 1;
    }
    if (c->cbs.push == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(r->element[0]->str, kinds[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Hands one reply to its request (or the push callback). */
static void lconn_dispatch(rlk_lconn *c, redisReply *r)
{
    if (lconn_is_push(c, r)) {
        c->cbs.push(c->cbs.arg, r);
    } else if (c->head == NULL) {
        lconn_break(c, rlk_err(RLOCK_EPROTO, "a reply nobody asked for"));
    } else {
        lconn_req *q = c->head;
        c->head = q->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        if (q->fn != NULL) {
            q->fn(q->arg, r, RLOCK_OK);
        }
        free(q);
    }
    freeReplyObject(r);
}

/* Reads until the socket (and, over TLS, the session) has nothing more. */
static void lconn_read(rlk_lconn *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = lconn_recv_some(c, buf, sizeof(buf));
        if (n < 0) {
            lconn_break(c, (int)n);
            return;
        }
        if (n > 0 && rlk_resp_guard_scan(&c->guard, buf, (size_t)n) != RLOCK_OK) {
            lconn_break(c, RLOCK_EPROTO); /* a reply hiredis must not allocate for */
            return;
        }
        if (n == 0 || redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            break;
        }
    }
    void *rep = NULL;
    while (c->state == LCONN_UP && !c->free_wanted) {
        if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
            lconn_break(c, rlk_err(RLOCK_EPROTO, "unreadable reply from Redis"));
            return;
        }
        if (rep == NULL) {
            return;
        }
        c->replied = 1;
        lconn_dispatch(c, rep);
    }
}

/* One step of the TLS handshake; the last one makes the connection usable. */
static void lconn_handshake(rlk_lconn *c)
{
    short ev = 0;
    int r = rlk_tls_handshake_step(c->cbs.tls, c->ssl, c->host, &ev);
    if (r < 0) {
        lconn_break(c, r);
    } else if (r == 1) {
        c->state = LCONN_UP;
    } else {
        c->hs_events = ev == POLLIN ? RLOCK_LOOP_READ : RLOCK_LOOP_WRITE;
    }
}

static int lconn_dial_next(rlk_lconn *c);

static void lconn_connected(rlk_lconn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        int r =
            c->ai_next != NULL ? lconn_dial_next(c)
            : c->path != NULL
                ? rlk_err(RLOCK_ECONN, "cannot connect to %s (errno %d)", c->path, err)
                : rlk_err(RLOCK_ECONN, "cannot connect to %s:%d (errno %d)", c->host, c->port, err);
        if (r != RLOCK_OK) {
            lconn_break(c, r);
        }
        return;
    }
    /* A unix socket carries no TLS, as for a threaded client (unix:// has no TLS form). */
    if (c->cbs.tls == NULL || c->path != NULL) {
        c->state = LCONN_UP;
        return;
    }
    int r = rlk_tls_session(c->cbs.tls, c->fd, c->host, &c->ssl);
    if (r != RLOCK_OK) {
        lconn_break(c, r);
        return;
    }
    c->state = LCONN_HANDSHAKE;
    lconn_handshake(c);
}

/* The end of one of the connection's loop callbacks: the free asked for inside it, or the
 * watched events and the timer brought up to date. */
static void lconn_end_callback(rlk_lconn *c)
{
    /* What the callback queued goes out now, in one write, rather than a loop turn later. */
    if (c->state == LCONN_UP && !c->free_wanted && !c->wr_wants_read) {
        lconn_write(c);
    }
    c->depth--;
    if (c->free_wanted && c->depth == 0) {
        lconn_release(c);
        return;
    }
    lconn_watch(c);
    lconn_arm(c);
}

static void lconn_on_timer(void *arg)
{
    rlk_lconn *c = arg;
    c->depth++;
    int64_t now = rlk_now_ms();
    if (c->state < LCONN_UP && now >= c->dial_due) {
        lconn_break(c, rlk_err(RLOCK_ECONN, "no connection to Redis within connect_timeout_ms"));
    } else if (c->state == LCONN_UP && c->head != NULL && now >= c->head->due) {
        lconn_break(c, rlk_err(RLOCK_ECONN, "no reply from Redis within command_timeout_ms"));
    }
    lconn_end_callback(c);
}

static void lconn_on_io(void *arg, int events)
{
    rlk_lconn *c = arg;
    c->depth++;
    if (c->state == LCONN_DIALLING && (events & (RLOCK_LOOP_WRITE | RLOCK_LOOP_READ))) {
        lconn_connected(c);
    } else if (c->state == LCONN_HANDSHAKE && events != 0) {
        lconn_handshake(c);
    }
    if (c->state == LCONN_UP && !c->free_wanted) {
        lconn_write(c);
    }
    /* Over TLS, the session may hold bytes the socket no longer shows, and a read may have
     * waited for writability: it reads on every event. */
    if (c->state == LCONN_UP && !c->free_wanted && (events & RLOCK_LOOP_READ || c->ssl != NULL)) {
        lconn_read(c);
    }
    lconn_end_callback(c);
}

/* A request queued outside the connection's own callbacks, with nothing before it, is written at
 * once: a loop turn and two watcher changes sooner (a waiter woken by a message sends its attempt
 * from the subscriber's callback). A failed write is left to the write watcher, so that the
 * connection breaks on the loop's next turn and no request completes inside the caller's call. */
static void lconn_write_now(rlk_lconn *c)
{
    ssize_t n = lconn_send_some(c, c->obuf, c->olen);
    if (n > 0) {
        c->opos = (size_t)n;
        if (c->opos == c->olen) {
            lconn_written(c);
        }
    }
}

int rlk_lconn_send(rlk_lconn *c, const char *buf, size_t len, rlk_lconn_reply_fn fn, void *arg)
{
    if (c->state == LCONN_BROKEN || c->free_wanted) {
        return rlk_err(RLOCK_ECONN, "the connection to Redis is broken");
    }
    lconn_req *q = NULL;
    if (fn != NULL && (q = calloc(1, sizeof(*q))) == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory queueing a request");
    }
    int idle = c->olen == 0 && c->state == LCONN_UP && c->depth == 0 && !c->wr_wants_read;
    int r = lconn_append(c, buf, len);
    if (r != RLOCK_OK) {
        free(q);
        return r;
    }
    if (idle) {
        lconn_write_now(c);
    }
    if (q != NULL) {
        q->fn = fn;
        q->arg = arg;
        q->due = rlk_add_sat(rlk_now_ms(), c->cbs.command_timeout_ms > 0 ? c->cbs.command_timeout_ms
                                                                         : RLOCK_MAX_DURATION_MS);
        *(c->tail != NULL ? &c->tail->next : &c->head) = q;
        c->tail = q;
    }
    lconn_watch(c);
    if (c->depth == 0 && q != NULL && c->head == q) {
        lconn_arm(c);
    }
    return RLOCK_OK;
}

int rlk_lconn_command(rlk_lconn *c, int argc, const char *const *argv, const size_t *lens,
                      rlk_lconn_reply_fn fn, void *arg)
{
    char *cmd = NULL;
    long long n = rlk_resp_format(argc, argv, lens, &cmd);
    if (n < 0) {
        return rlk_err(RLOCK_ENOMEM, "out of memory formatting a request");
    }
    int r = rlk_lconn_send(c, cmd, (size_t)n, fn, arg);
    free(cmd);
    return r;
}

int rlk_lconn_ok(const rlk_lconn *c)
{
    return c != NULL && c->state != LCONN_BROKEN && !c->free_wanted;
}

int rlk_lconn_replied(const rlk_lconn *c)
{
    return c != NULL && c->replied;
}

void rlk_lconn_flush(rlk_lconn *c)
{
    if (c == NULL || c->state != LCONN_UP || c->free_wanted) {
        return;
    }
    /* Through lconn_send_some(), so that a TLS connection's bytes go out as records. */
    while (c->opos < c->olen) {
        ssize_t n = lconn_send_some(c, c->obuf + c->opos, c->olen - c->opos);
        if (n <= 0) {
            return;
        }
        c->opos += (size_t)n;
    }
    (void)shutdown(c->fd, SHUT_WR);
    char buf[4096];
    while (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
}

int rlk_lconn_parked(const rlk_lconn *c)
{
    return c != NULL && c->state == LCONN_PARKED && !c->free_wanted;
}

void rlk_lconn_free(rlk_lconn *c, int err)
{
    if (c == NULL) {
        return;
    }
    c->free_wanted = 1;
    c->depth++;
    lconn_break(c, err);
    lconn_fail_all(c, err);
    c->depth--;
    if (c->depth == 0) {
        lconn_release(c);
    }
}

/* A setup reply (AUTH, SELECT): an error reply breaks the connection. */
static void lconn_setup_reply(void *arg, redisReply *rep, int err)
{
    rlk_lconn *c = arg;
    if (err == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        lconn_break(c, rlk_err(RLOCK_EAUTH, "Redis refused AUTH or SELECT: %s", rep->str));
    }
}

static int lconn_setup(rlk_lconn *c, const rlk_url *url)
{
    int r = RLOCK_OK;
    if (url->password != NULL) {
        const char *argv[3] = {"AUTH", url->user, url->password};
        int argc = url->user != NULL ? 3 : 2;
        if (url->user == NULL) {
            argv[1] = url->password;
        }
        r = rlk_lconn_command(c, argc, argv, NULL, lconn_setup_reply, c);
    }
    if (r == RLOCK_OK && url->db > 0) {
        char db[24];
        (void)rlk_fmt_i64(db, url->db);
        const char *argv[2] = {"SELECT", db};
        r = rlk_lconn_command(c, 2, argv, NULL, lconn_setup_reply, c);
    }
    return r;
}

/* Dials the next of the host's addresses without waiting (each one refused at once is passed
 * over), with a watcher of the new socket. RLOCK_OK while a dial is under way, else RLOCK_ECONN
 * or RLOCK_ENOMEM. */
static int lconn_dial_next(rlk_lconn *c)
{
    int e = 0;
    while (c->ai_next != NULL) {
        struct addrinfo *ai = c->ai_next;
        c->ai_next = ai->ai_next;
        if (c->io != NULL) {
            c->loop.io_free(c->io);
            c->io = NULL;
            c->events = 0;
        }
        if (c->fd >= 0) {
            close(c->fd);
        }
        c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            e = errno;
            continue;
        }
        c->state = LCONN_DIALLING;
        c->io = c->loop.io_new(c->loop.loop_data, c->fd, lconn_on_io, c);
        return c->io != NULL ? RLOCK_OK
                             : rlk_err(RLOCK_ENOMEM, "the loop could not watch a socket");
    }
    return rlk_err(RLOCK_ECONN, "cannot connect to %s:%d (errno %d)", c->host, c->port, e);
}

/* The host's addresses came (on the loop): the first dial starts. */
static void lconn_resolved(void *arg, struct addrinfo *ai, int err)
{
    rlk_lconn *c = arg;
    c->depth++;
    c->res = NULL;
    c->ai = c->ai_next = ai;
    int r = err != RLOCK_OK ? err : lconn_dial_next(c);
    if (r != RLOCK_OK) {
        lconn_break(c, r);
    }
    lconn_end_callback(c);
}

/* Dials the unix socket without waiting. A full backlog refuses at once (EAGAIN: a unix
 * connect does not complete later), which fails as a refused TCP dial does. */
static int lconn_dial_unix(rlk_lconn *c)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t len = strlen(c->path);
    if (len >= sizeof(sa.sun_path)) {
        return rlk_err(RLOCK_ECONN, "connect to unix socket: path too long");
    }
    memcpy(sa.sun_path, c->path, len + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0 ||
        (connect(c->fd, (const struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)) {
        return rlk_err(RLOCK_ECONN, "cannot connect to %s (errno %d)", c->path, errno);
    }
    c->state = LCONN_DIALLING;
    c->io = c->loop.io_new(c->loop.loop_data, c->fd, lconn_on_io, c);
    return c->io != NULL ? RLOCK_OK : rlk_err(RLOCK_ENOMEM, "the loop could not watch a socket");
}

/* Starts reaching url's host: a unix socket or a numeric address is dialled now, a name looked
 * up first. */
static int lconn_start(rlk_lconn *c)
{
    if (c->path != NULL) {
        return lconn_dial_unix(c);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    char port[16];
    (void)rlk_fmt_i64(port, c->port);
    if (getaddrinfo(c->host, port, &hints, &c->ai) == 0) {
        c->ai_next = c->ai;
        return lconn_dial_next(c);
    }
    c->ai = NULL;
    c->state = LCONN_RESOLVING;
    return rlk_lresolve_start(&c->loop, c->host, c->port, lconn_resolved, c, &c->res);
}

void rlk_lconn_aim(rlk_lconn *c, const char *host, int port)
{
    if (!rlk_lconn_parked(c)) {
        return;
    }
    c->depth++;
    c->port = port;
    c->host = strdup(host);
    int r = c->host != NULL ? lconn_start(c)
                            : rlk_err(RLOCK_ENOMEM, "out of memory making a connection");
    if (r != RLOCK_OK) {
        lconn_break(c, r);
    }
    lconn_end_callback(c);
}

int rlk_lconn_new(const rlock_loop *loop, const rlk_url *url, const rlk_lconn_cbs *cbs,
                  rlk_lconn **out)
{
    *out = NULL;
    rlk_lconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory making a connection");
    }
    c->loop = *loop;
    c->cbs = *cbs;
    c->fd = -1;
    c->port = url->port;
    c->reader = redisReaderCreate();
    c->host = url->host != NULL ? strdup(url->host) : NULL;
    c->path = url->path != NULL ? strdup(url->path) : NULL;
    int r = c->reader != NULL && (c->host != NULL || url->host == NULL) &&
                    (c->path != NULL || url->path == NULL)
                ? RLOCK_OK
                : rlk_err(RLOCK_ENOMEM, "out of memory making a connection");
    if (r == RLOCK_OK && (c->timer = loop->timer_new(loop->loop_data, lconn_on_timer, c)) == NULL) {
        r = rlk_err(RLOCK_ENOMEM, "the loop gave no timer");
    }
    c->dial_due = rlk_add_sat(rlk_now_ms(), cbs->connect_timeout_ms > 0 ? cbs->connect_timeout_ms
                                                                        : RLOCK_MAX_DURATION_MS);
    r = r || (url->host == NULL && url->path == NULL) ? r : lconn_start(c);
    r = r ? r : lconn_setup(c, url);
    if (r != RLOCK_OK) {
        lconn_fail_all(c, r); /* setup requests only: no caller's callback runs */
        lconn_release(c);
        return r;
    }
    lconn_watch(c);
    lconn_arm(c);
    *out = c;
    return RLOCK_OK;
}
