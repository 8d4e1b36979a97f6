/*
 * A non-blocking connection on the caller's loop (loop_conn.h). Writes happen only from the
 * loop's readiness callback, never inside rlk_lconn_send(), so that no failure (and so no
 * caller's callback) ever runs on the stack of the call that queued a request.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "loop_conn.h"
#include "resp_format.h"
#include "resp_guard.h"

/* A request waiting for its reply. */
typedef struct lconn_req {
    struct lconn_req *next;
    rlk_lconn_reply_fn fn;
    void *arg;
    int64_t due; /* monotonic ms by which its reply must have come */
} lconn_req;

enum { LCONN_DIALLING, LCONN_UP, LCONN_BROKEN };

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
};

static void lconn_watch(rlk_lconn *c)
{
    int ev = 0;
    if (c->state == LCONN_DIALLING) {
        ev = RLOCK_LOOP_WRITE;
    } else if (c->state == LCONN_UP) {
        ev = RLOCK_LOOP_READ | (c->olen > c->opos ? RLOCK_LOOP_WRITE : 0);
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
    if (c->state == LCONN_DIALLING) {
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

static void lconn_write(rlk_lconn *c)
{
    while (c->opos < c->olen) {
        ssize_t n = send(c->fd, c->obuf + c->opos, c->olen - c->opos, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                lconn_break(c, rlk_err(RLOCK_ECONN, "write to Redis failed (errno %d)", errno));
            }
            return;
        }
        c->opos += (size_t)n;
    }
    c->opos = c->olen = 0;
}

static int lconn_is_push(const rlk_lconn *c, const redisReply *r)
{
    static const char *const kinds[] = {"message", "subscribe", "unsubscribe", "pmessage"};
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

static void lconn_read(rlk_lconn *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            lconn_break(c, rlk_err(RLOCK_ECONN, "Redis closed the connection"));
            return;
        }
        if (n > 0 && rlk_resp_guard_scan(&c->guard, buf, (size_t)n) != RLOCK_OK) {
            lconn_break(c, RLOCK_EPROTO); /* a reply hiredis must not allocate for */
            return;
        }
        if (n < 0 || redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            break;
        }
        if ((size_t)n < sizeof(buf)) {
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
        lconn_dispatch(c, rep);
    }
}

static void lconn_connected(rlk_lconn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        lconn_break(c, rlk_err(RLOCK_ECONN, "cannot connect to Redis (errno %d)", err));
        return;
    }
    c->state = LCONN_UP;
}

/* The end of one of the connection's loop callbacks: the free asked for inside it, or the
 * watched events and the timer brought up to date. */
static void lconn_end_callback(rlk_lconn *c)
{
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
    if (c->state == LCONN_DIALLING && now >= c->dial_due) {
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
    }
    if (c->state == LCONN_UP && !c->free_wanted) {
        lconn_write(c);
    }
    if (c->state == LCONN_UP && !c->free_wanted && (events & RLOCK_LOOP_READ)) {
        lconn_read(c);
    }
    lconn_end_callback(c);
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
    int r = lconn_append(c, buf, len);
    if (r != RLOCK_OK) {
        free(q);
        return r;
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

void rlk_lconn_flush(rlk_lconn *c)
{
    if (c == NULL || c->state != LCONN_UP || c->free_wanted) {
        return;
    }
    while (c->opos < c->olen) {
        ssize_t n = send(c->fd, c->obuf + c->opos, c->olen - c->opos, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && errno == EINTR)) {
            return;
        }
        c->opos += n > 0 ? (size_t)n : 0;
    }
    (void)shutdown(c->fd, SHUT_WR);
    char buf[4096];
    while (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
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

/* A non-blocking socket connecting to host:port, a numeric address (no name lookup). */
static int lconn_dial(const rlk_url *url, int *fd)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    (void)rlk_fmt_i64(port, url->port);
    if (url->host == NULL || getaddrinfo(url->host, port, &hints, &ai) != 0) {
        return rlk_err(RLOCK_EINVAL, "a loop client needs a numeric address, not '%s'",
                       url->host != NULL ? url->host : "");
    }
    *fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        freeaddrinfo(ai);
        return rlk_err(RLOCK_ECONN, "socket() failed (errno %d)", errno);
    }
    int one = 1;
    (void)setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = connect(*fd, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    freeaddrinfo(ai);
    if (rc != 0 && e != EINPROGRESS) {
        close(*fd);
        *fd = -1;
        return rlk_err(RLOCK_ECONN, "cannot connect to %s:%d (errno %d)", url->host, url->port, e);
    }
    return RLOCK_OK;
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
    c->reader = redisReaderCreate();
    int r = c->reader != NULL ? lconn_dial(url, &c->fd)
                              : rlk_err(RLOCK_ENOMEM, "out of memory making a connection");
    if (r == RLOCK_OK && (c->io = loop->io_new(loop->loop_data, c->fd, lconn_on_io, c)) == NULL) {
        r = rlk_err(RLOCK_ENOMEM, "the loop could not watch a socket");
    }
    if (r == RLOCK_OK && (c->timer = loop->timer_new(loop->loop_data, lconn_on_timer, c)) == NULL) {
        r = rlk_err(RLOCK_ENOMEM, "the loop gave no timer");
    }
    c->dial_due = rlk_add_sat(rlk_now_ms(), cbs->connect_timeout_ms > 0 ? cbs->connect_timeout_ms
                                                                        : RLOCK_MAX_DURATION_MS);
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
