/*
 * The connection pool: up to pool_size blocking hiredis connections, dialled on demand,
 * borrowed exclusively by one thread at a time. A connection that failed is closed, never
 * reused; the next borrow dials a fresh one. Dialling failures back off (10 ms doubling to 1 s)
 * so a down server costs callers a fast RLOCK_ECONN instead of a connect timeout each.
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "pool.h"

#define RLK_BACKOFF_MIN_MS 10
#define RLK_BACKOFF_MAX_MS 1000

struct rlk_pool {
    rlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* signalled when a connection is returned or a slot frees */
    rlk_conn *idle;
    int open;              /* connections open or being dialled */
    int64_t next_dial_at;  /* monotonic ms before which no dial is tried (backoff) */
    int64_t backoff_ms;
    int last_code;         /* error of the last failed dial */
    char last_err[256];
};

int rlk_conn_error(const redisContext *ctx, const char *what)
{
    if (ctx == NULL) {
        return rlk_err(RLOCK_ENOMEM, "%s: cannot allocate a connection", what);
    }
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return rlk_err(RLOCK_ECONN, "%s: timed out waiting for Redis", what);
    }
    return rlk_err(RLOCK_ECONN, "%s: %s", what, ctx->errstr[0] ? ctx->errstr : "I/O error");
}

/* Sends AUTH and SELECT as the URL asks. */
static int rlk_handshake(const rlock_client *c, redisContext *ctx)
{
    const rlk_url *u = &c->url;
    if (u->password != NULL) {
        /* AUTH <user> <password> for an ACL user, AUTH <password> for the default user. */
        const char *argv[3] = {"AUTH", u->user, u->password};
        int argc = 3;
        if (u->user == NULL) {
            argv[1] = u->password;
            argc = 2;
        }
        redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
        if (r == NULL) {
            return rlk_conn_error(ctx, "AUTH");
        }
        int bad = r->type == REDIS_REPLY_ERROR;
        if (bad) {
            rlk_err(RLOCK_EAUTH, "AUTH refused by Redis: %s", r->str);
        }
        freeReplyObject(r);
        if (bad) {
            return RLOCK_EAUTH;
        }
    }
    if (u->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u->db);
        const char *argv[2] = {"SELECT", db};
        redisReply *r = redisCommandArgv(ctx, 2, argv, NULL);
        if (r == NULL) {
            return rlk_conn_error(ctx, "SELECT");
        }
        int bad = r->type == REDIS_REPLY_ERROR;
        if (bad) {
            rlk_err(RLOCK_EAUTH, "SELECT %d refused by Redis: %s", u->db, r->str);
        }
        freeReplyObject(r);
        if (bad) {
            return RLOCK_EAUTH;
        }
    }
    return RLOCK_OK;
}

int rlk_dial(const rlock_client *c, int64_t read_timeout_ms, redisContext **out)
{
    *out = NULL;
    struct timeval ctv = rlk_timeval(c->opts.connect_timeout_ms);
    redisContext *ctx = c->url.is_unix ? redisConnectUnixWithTimeout(c->url.path, ctv)
                                       : redisConnectWithTimeout(c->url.host, c->url.port, ctv);
    if (ctx == NULL || ctx->err) {
        int r = rlk_conn_error(ctx, c->url.is_unix ? "connect (unix socket)" : "connect");
        if (ctx != NULL) {
            redisFree(ctx);
        }
        return r;
    }
    /* The handshake is bounded by the connect timeout, later commands by the command timeout. */
    redisSetTimeout(ctx, ctv);
    if (!c->url.is_unix) {
        redisEnableKeepAlive(ctx);
    }
    int r = rlk_handshake(c, ctx);
    if (r == RLOCK_OK && read_timeout_ms > 0) {
        r = redisSetTimeout(ctx, rlk_timeval(read_timeout_ms)) == REDIS_OK
                ? RLOCK_OK
                : rlk_conn_error(ctx, "setting the command timeout");
    }
    if (r != RLOCK_OK) {
        redisFree(ctx);
        return r;
    }
    *out = ctx;
    return RLOCK_OK;
}

int rlk_pool_new(rlock_client *c, rlk_pool **out)
{
    rlk_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the pool");
    }
    p->c = c;
    pthread_mutex_init(&p->mu, NULL);
    rlk_cond_init_monotonic(&p->cv);
    *out = p;
    return RLOCK_OK;
}

void rlk_pool_free(rlk_pool *p)
{
    if (p == NULL) {
        return;
    }
    while (p->idle != NULL) {
        rlk_conn *n = p->idle->next_idle;
        redisFree(p->idle->ctx);
        free(p->idle);
        p->idle = n;
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* An idle request connection never has anything to read: readability means the server closed
 * it (CLIENT KILL, restart, timeout) or sent garbage. Checking costs one poll() and saves a
 * failed command on a connection we already know is gone. */
static int rlk_conn_dead(const rlk_conn *conn)
{
    struct pollfd pfd = {.fd = conn->ctx->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) != 0;
}

static void rlk_timespec_at(struct timespec *ts, int64_t deadline_ms)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)((deadline_ms % 1000) * 1000000);
}

static int rlk_pool_dial_slot(rlk_pool *p, rlk_conn **out)
{
    rlk_conn *conn = calloc(1, sizeof(*conn));
    int r = conn ? rlk_dial(p->c, p->c->opts.command_timeout_ms, &conn->ctx)
                 : rlk_err(RLOCK_ENOMEM, "cannot allocate a connection");
    pthread_mutex_lock(&p->mu);
    if (r != RLOCK_OK) {
        p->open--;
        p->last_code = r;
        snprintf(p->last_err, sizeof(p->last_err), "%s", rlock_last_error());
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : RLK_BACKOFF_MIN_MS;
        p->backoff_ms = p->backoff_ms > RLK_BACKOFF_MAX_MS ? RLK_BACKOFF_MAX_MS : p->backoff_ms;
        p->next_dial_at = rlk_now_ms() + p->backoff_ms;
        pthread_cond_signal(&p->cv);
        free(conn);
    } else {
        p->backoff_ms = 0;
        p->next_dial_at = 0;
        *out = conn;
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

/* Takes the first live idle connection, closing dead ones on the way (the mutex is dropped
 * while one is freed). Mutex held; NULL if none is idle. */
static rlk_conn *rlk_pool_pop_live(rlk_pool *p)
{
    while (p->idle != NULL) {
        rlk_conn *conn = p->idle;
        p->idle = conn->next_idle;
        if (!rlk_conn_dead(conn)) {
            return conn;
        }
        p->open--;
        pthread_mutex_unlock(&p->mu);
        redisFree(conn->ctx);
        free(conn);
        pthread_mutex_lock(&p->mu);
    }
    return NULL;
}

int rlk_pool_borrow(rlk_pool *p, rlk_conn **out)
{
    *out = NULL;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), p->c->opts.command_timeout_ms);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        rlk_conn *conn = rlk_pool_pop_live(p);
        if (conn != NULL) {
            pthread_mutex_unlock(&p->mu);
            *out = conn;
            return RLOCK_OK;
        }
        if (p->open < p->c->opts.pool_size) {
            int64_t now = rlk_now_ms();
            if (now < p->next_dial_at) {
                /* Copy under the mutex: a concurrent failed dial rewrites last_err. */
                int code = p->last_code;
                int64_t wait = p->next_dial_at - now;
                char last[sizeof(p->last_err)];
                memcpy(last, p->last_err, sizeof(last));
                pthread_mutex_unlock(&p->mu);
                return rlk_err(code, "%s (next reconnect attempt in %lld ms)", last,
                               (long long)wait);
            }
            p->open++;
            pthread_mutex_unlock(&p->mu);
            return rlk_pool_dial_slot(p, out);
        }
        struct timespec ts;
        rlk_timespec_at(&ts, deadline);
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT && p->idle == NULL &&
            p->open >= p->c->opts.pool_size) {
            pthread_mutex_unlock(&p->mu);
            return rlk_err(RLOCK_ECONN, "no pooled connection became free within %lld ms "
                           "(pool_size %d)", (long long)p->c->opts.command_timeout_ms,
                           p->c->opts.pool_size);
        }
    }
}

int rlk_pool_try_idle(rlk_pool *p, rlk_conn **out)
{
    pthread_mutex_lock(&p->mu);
    *out = rlk_pool_pop_live(p);
    pthread_mutex_unlock(&p->mu);
    return *out != NULL ? RLOCK_OK : RLOCK_ECONN;
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
            return rlk_err(RLOCK_ECONN, "sending a request: %s", strerror(errno));
        }
        buf += n;
        len -= (size_t)n;
    }
    return RLOCK_OK;
}

void rlk_pool_return(rlk_pool *p, rlk_conn *conn, int broken)
{
    if (conn == NULL) {
        return;
    }
    if (broken || conn->ctx->err) {
        redisFree(conn->ctx);
        free(conn);
        pthread_mutex_lock(&p->mu);
        p->open--;
    } else {
        pthread_mutex_lock(&p->mu);
        conn->next_idle = p->idle;
        p->idle = conn;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void rlk_args_init(rlk_args *a)
{
    a->n = 0;
}

void rlk_args_add(rlk_args *a, const char *p, size_t len)
{
    /* Every caller adds a fixed number of arguments below RLK_ARGS_MAX: more is a bug. The
     * check stays for builds without assertions, where the argument is dropped. */
    assert(a->n < RLK_ARGS_MAX);
    if (a->n < RLK_ARGS_MAX) {
        a->v[a->n] = p;
        a->len[a->n] = len;
        a->n++;
    }
}

void rlk_args_adds(rlk_args *a, const char *s)
{
    rlk_args_add(a, s, strlen(s));
}

void rlk_args_addi(rlk_args *a, int64_t v)
{
    assert(a->n < RLK_ARGS_MAX);
    if (a->n < RLK_ARGS_MAX) {
        int n = snprintf(a->num[a->n], sizeof(a->num[0]), "%lld", (long long)v);
        rlk_args_add(a, a->num[a->n], (size_t)n);
    }
}

/* A failure where the request provably never reached Redis' command processing is worth one
 * resend; a timeout is not (the server may be slow or paused, and resending doubles the wait). */
static int rlk_conn_resendable(const redisContext *ctx)
{
    if (ctx->err == REDIS_ERR_EOF) {
        return 1;
    }
    return ctx->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE);
}

int rlk_cmd(rlock_client *c, int flags, const rlk_args *argv, redisReply **out)
{
    return rlk_exec(c, flags, argv->n, argv->v, argv->len, -1, out);
}

/* Runs one command on a pooled connection; with script >= 0 a NOSCRIPT reply loads that script
 * and resends once. Idempotent commands are resent once on a fresh connection after a
 * connection failure. */
int rlk_exec(rlock_client *c, int flags, int argc, const char *const *argv, const size_t *lens,
             int script, redisReply **out)
{
    *out = NULL;
    int r = rlk_client_check(c);
    for (int attempt = 0; r == RLOCK_OK; attempt++) {
        rlk_conn *conn = NULL;
        r = rlk_pool_borrow(c->pool, &conn);
        if (r != RLOCK_OK) {
            return r;
        }
        redisReply *rep = redisCommandArgv(conn->ctx, argc, (const char **)argv, lens);
        if (rep != NULL && script >= 0 && rlk_reply_is_noscript(rep)) {
            freeReplyObject(rep);
            rep = NULL;
            int lr = rlk_script_load(conn, script);
            if (lr == RLOCK_OK) {
                rep = redisCommandArgv(conn->ctx, argc, (const char **)argv, lens);
            } else if (!conn->ctx->err) {
                /* The load's own code (EREDIS, or EPROTO for a SHA1 mismatch) matches the
                 * detail it recorded. */
                rlk_pool_return(c->pool, conn, 0);
                return lr;
            }
        }
        if (rep == NULL) {
            int resend = (flags & RLK_IDEMPOTENT) && attempt == 0 &&
                         rlk_conn_resendable(conn->ctx);
            r = rlk_conn_error(conn->ctx, argc > 0 ? argv[0] : "command");
            rlk_pool_return(c->pool, conn, 1);
            if (resend) {
                r = RLOCK_OK;
                continue;
            }
            return r;
        }
        rlk_pool_return(c->pool, conn, 0);
        *out = rep;
        return RLOCK_OK;
    }
    return r;
}
