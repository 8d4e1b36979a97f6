/*
 * The connection pool: up to pool_size connections, dialled on demand with back-off, each
 * borrowed by one thread at a time; a failed connection is closed, never reused. A borrow checks
 * an idle connection with a zero-timeout poll() unless it was returned within the last
 * millisecond (and every borrow checks for a while after a failure). docs/internals/
 * connections.md explains the trade-off.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_slot.h"
#include "conn_open.h"
#include "error.h"
#include "pool.h"

#define RLK_BACKOFF_MIN_MS  10
#define RLK_BACKOFF_MAX_MS  1000
#define RLK_POOL_FRESH_US   1000
#define RLK_POOL_SUSPECT_US 100000

/* An idle connection and when it was returned (monotonic us). */
typedef struct rlk_idle_conn {
    rlk_conn *conn;
    int64_t since_us;
} rlk_idle_conn;

struct rlk_pool {
    rlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled when a connection is returned or a slot frees */
    rlk_idle_conn *idle; /* a stack of n_idle (<= pool_size): the last returned on top */
    int n_idle;
    long checks;              /* liveness polls made (rlk_pool_checks) */
    int64_t suspect_until_us; /* monotonic us: a connection broke, every borrow checks */
    int open;                 /* connections open or being dialled */
    int64_t next_dial_at;     /* monotonic ms before which no dial is tried (backoff) */
    int64_t backoff_ms;
    uint64_t gen;  /* bumped by rlk_pool_reset(): connections of older ones are closed */
    int last_code; /* error of the last failed dial */
    /* Connections closed because they broke and not dialled again yet: the next successful
     * dials replace them and count as reconnects (rlock_reconnects_total). */
    int broken;
    char last_err[256];
    /* Every open connection, idle or borrowed (pool_size slots, NULL = free): a child of fork()
     * must abandon the ones other threads of the parent had borrowed too (rlk_pool_abandon). */
    rlk_conn **all;
    /* A cluster node's pool dials this node (rlk_pool_new_at); NULL: the client's data node. */
    char *node_host;
    int node_port;
    rlk_replicas node_replicas; /* a cluster node's replica count (replica.c) */
};

/* The replica count a connection of p syncs with: its cluster node's, or (NULL) the client's. */
static rlk_replicas *pool_conn_replicas(rlk_pool *p)
{
    return p->node_host != NULL ? &p->node_replicas : NULL;
}

int rlk_pool_new(rlock_client *c, rlk_pool **out)
{
    rlk_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the pool");
    }
    /* At most pool_size connections are open, so the stack never overflows. */
    p->idle = calloc((size_t)c->opts.pool_size, sizeof(*p->idle));
    if (p->idle == NULL) {
        free(p);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the pool");
    }
    p->c = c;
    p->all = calloc((size_t)c->opts.pool_size, sizeof(rlk_conn *));
    if (p->all == NULL) {
        free(p->idle);
        free(p);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the pool");
    }
    pthread_mutex_init(&p->mu, NULL);
    rlk_cond_init_monotonic(&p->cv);
    *out = p;
    return RLOCK_OK;
}

int rlk_pool_new_at(rlock_client *c, const char *host, int port, rlk_pool **out)
{
    char *copy = strdup(host);
    if (copy == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the pool");
    }
    int r = rlk_pool_new(c, out);
    if (r != RLOCK_OK) {
        free(copy);
        return r;
    }
    (*out)->node_host = copy;
    (*out)->node_port = port;
    return RLOCK_OK;
}

/* Dials the pool's node: the client's data node, or the cluster node it was made for. */
static int pool_open(rlk_pool *p, int64_t deadline, rlk_conn **conn)
{
    if (p->node_host == NULL) {
        return rlk_conn_open(p->c, deadline, p->c->opts.command_timeout_ms, conn);
    }
    rlk_endpoint ep;
    char host[RLK_HOST_MAX];
    rlk_client_endpoint(p->c, &ep, host);
    ep.host = p->node_host;
    ep.port = p->node_port;
    return rlk_conn_open_at(p->c, &ep, deadline, p->c->opts.command_timeout_ms, conn);
}

void rlk_pool_free(rlk_pool *p)
{
    if (p == NULL) {
        return;
    }
    free(p->node_host);
    while (p->n_idle > 0) {
        rlk_conn_close(p->idle[--p->n_idle].conn);
    }
    free(p->idle);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->all);
    free(p);
}

void rlk_pool_abandon(rlk_pool *p)
{
    if (p == NULL) {
        return;
    }
    for (int i = 0; i < p->c->opts.pool_size; i++) {
        rlk_conn_abandon(p->all[i]);
    }
    /* Neither the mutex nor the condition variable is destroyed: threads of the parent that do
     * not exist here may be counted as waiting on the latter, and glibc's destroy would wait for
     * them forever. Their memory is simply released. */
    free(p->idle);
    free(p->all);
    free(p->node_host);
    free(p);
}

void rlk_pool_fork_lock(rlk_pool *p)
{
    pthread_mutex_lock(&p->mu);
}

void rlk_pool_fork_unlock(rlk_pool *p)
{
    pthread_mutex_unlock(&p->mu);
}

/* Records conn in the first free slot of all (mutex held). There is one: open counts it. */
static void pool_track(rlk_pool *p, rlk_conn *conn)
{
    int i = 0;
    while (i < p->c->opts.pool_size && p->all[i] != NULL) {
        i++;
    }
    assert(i < p->c->opts.pool_size);
    if (i < p->c->opts.pool_size) {
        p->all[i] = conn;
    }
}

/* Forgets conn before it is closed (mutex held). Linear, but only on a close. */
static void pool_untrack(rlk_pool *p, const rlk_conn *conn)
{
    for (int i = 0; i < p->c->opts.pool_size; i++) {
        if (p->all[i] == conn) {
            p->all[i] = NULL;
            return;
        }
    }
}

static void timespec_at(struct timespec *ts, int64_t deadline_ms)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)((deadline_ms % 1000) * 1000000);
}

/* The detail of the last error without the "<code's message>: " that rlk_err() put in front,
 * so that quoting it in a later message does not repeat that prefix. */
static const char *err_detail(int code)
{
    const char *msg = rlock_last_error();
    const char *prefix = rlock_strerror(code);
    size_t n = strlen(prefix);
    return strncmp(msg, prefix, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

static int pool_dial_slot(rlk_pool *p, int64_t dial_ms, rlk_conn **out)
{
    rlk_conn *conn = NULL;
    pthread_mutex_lock(&p->mu);
    uint64_t gen = p->gen; /* before the dial: a reset during it makes this one stale */
    pthread_mutex_unlock(&p->mu);
    int64_t deadline = rlk_add_sat(rlk_now_ms(), dial_ms);
    int r = pool_open(p, deadline, &conn);
    int reconnect = 0;
    pthread_mutex_lock(&p->mu);
    if (r != RLOCK_OK) {
        p->open--;
        p->last_code = r;
        snprintf(p->last_err, sizeof(p->last_err), "%s", err_detail(r));
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : RLK_BACKOFF_MIN_MS;
        p->backoff_ms = p->backoff_ms > RLK_BACKOFF_MAX_MS ? RLK_BACKOFF_MAX_MS : p->backoff_ms;
        p->next_dial_at = rlk_now_ms() + p->backoff_ms;
        pthread_cond_signal(&p->cv);
    } else {
        reconnect = p->broken > 0;
        p->broken -= reconnect;
        p->backoff_ms = 0;
        p->next_dial_at = 0;
        conn->gen = gen;
        conn->replicas = pool_conn_replicas(p);
        pool_track(p, conn);
        *out = conn;
    }
    pthread_mutex_unlock(&p->mu);
    if (reconnect) {
        rlk_obs_count(p->c, RLK_CNT_RECONNECTS);
    }
    return r;
}

/* Takes the last returned live idle connection, closing dead ones on the way (the mutex is
 * dropped while one is freed). Unless check is set or a connection broke lately, one returned
 * less than RLK_POOL_FRESH_US ago is not polled (see the top of this file). Mutex held; NULL if
 * none is idle. */
static rlk_conn *pool_pop_live(rlk_pool *p, int check)
{
    while (p->n_idle > 0) {
        rlk_idle_conn top = p->idle[--p->n_idle];
        rlk_conn *conn = top.conn;
        int64_t now = rlk_now_us();
        if (!check && now >= p->suspect_until_us && top.since_us > now - RLK_POOL_FRESH_US) {
            return conn;
        }
        p->checks++;
        if (!rlk_conn_dead(conn)) {
            return conn;
        }
        p->open--;
        p->broken++;
        pool_untrack(p, conn);
        pthread_mutex_unlock(&p->mu);
        rlk_conn_close(conn);
        pthread_mutex_lock(&p->mu);
    }
    return NULL;
}

/* rlk_pool_borrow_dial(). With check set (a resend), dials a new connection if the pool has room
 * and no backoff runs, else polls an idle connection however fresh: a kill of every client may
 * still be closing connections one by one, and an idle one the poll finds alive may be next,
 * while a connection Redis accepts after the kill cannot be among them. */
static int pool_borrow_check(rlk_pool *p, int64_t dial_ms, int check, rlk_conn **out)
{
    *out = NULL;
    dial_ms = dial_ms < p->c->opts.connect_timeout_ms ? dial_ms : p->c->opts.connect_timeout_ms;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), p->c->opts.command_timeout_ms);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int dial = check && p->open < p->c->opts.pool_size && rlk_now_ms() >= p->next_dial_at;
        rlk_conn *conn = dial ? NULL : pool_pop_live(p, check);
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
            return pool_dial_slot(p, dial_ms, out);
        }
        struct timespec ts;
        timespec_at(&ts, deadline);
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT && p->n_idle == 0 &&
            p->open >= p->c->opts.pool_size) {
            pthread_mutex_unlock(&p->mu);
            return rlk_err(RLOCK_ECONN,
                           "no pooled connection became free within %lld ms "
                           "(pool_size %d)",
                           (long long)p->c->opts.command_timeout_ms, p->c->opts.pool_size);
        }
    }
}

int rlk_pool_borrow_dial(rlk_pool *p, int64_t dial_ms, rlk_conn **out)
{
    return pool_borrow_check(p, dial_ms, 0, out);
}

int rlk_pool_borrow(rlk_pool *p, rlk_conn **out)
{
    return pool_borrow_check(p, p->c->opts.connect_timeout_ms, 0, out);
}

int rlk_pool_try_idle(rlk_pool *p, rlk_conn **out)
{
    pthread_mutex_lock(&p->mu);
    *out = pool_pop_live(p, 0);
    pthread_mutex_unlock(&p->mu);
    return *out != NULL ? RLOCK_OK : RLOCK_ECONN;
}

void rlk_pool_return(rlk_pool *p, rlk_conn *conn, int broken)
{
    if (conn == NULL) {
        return;
    }
    int bad = broken || rlk_conn_broken(conn);
    pthread_mutex_lock(&p->mu);
    /* A connection of an older generation goes to a node that is no longer the master. */
    if (!bad && conn->gen == p->gen) {
        /* Every connection is counted in open (<= pool_size), so the stack has room. */
        assert(p->n_idle < p->c->opts.pool_size);
        p->idle[p->n_idle++] = (rlk_idle_conn){conn, rlk_now_us()};
        conn = NULL;
    } else {
        pool_untrack(p, conn);
        p->open--;
        p->broken += bad;
        /* What broke this connection (a kill, a restart) may have closed the idle ones too, and
         * those returned a moment after it: every borrow checks for a while. */
        p->suspect_until_us = bad ? rlk_now_us() + RLK_POOL_SUSPECT_US : p->suspect_until_us;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    rlk_conn_close(conn);
}

rlk_replicas *rlk_pool_replicas(rlk_pool *p)
{
    return pool_conn_replicas(p);
}

long rlk_pool_checks(rlk_pool *p)
{
    pthread_mutex_lock(&p->mu);
    long n = p->checks;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void rlk_pool_adopt(rlk_pool *p, rlk_conn *conn)
{
    pthread_mutex_lock(&p->mu);
    p->open++;
    conn->gen = p->gen;
    conn->replicas = pool_conn_replicas(p);
    pool_track(p, conn);
    pthread_mutex_unlock(&p->mu);
    rlk_pool_return(p, conn, 0);
}

void rlk_pool_reset(rlk_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->gen++;
    p->broken = 0; /* dials to the new master are no reconnects (a failover is counted) */
    p->backoff_ms = 0;
    p->next_dial_at = 0;
    /* Closed outside the mutex: a TLS close may write. The stack is emptied first, so no
     * borrower can take one of them meanwhile. */
    int n = p->n_idle;
    rlk_conn **old = n > 0 ? calloc((size_t)n, sizeof(rlk_conn *)) : NULL;
    for (int i = 0; i < n; i++) {
        rlk_conn *c = p->idle[i].conn;
        pool_untrack(p, c);
        p->open--;
        if (old != NULL) {
            old[i] = c;
        } else {
            rlk_conn_abandon(c); /* no memory for the list: close without a goodbye */
        }
    }
    p->n_idle = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; old != NULL && i < n; i++) {
        rlk_conn_close(old[i]);
    }
    free(old);
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
        size_t n = rlk_fmt_i64(a->num[a->n], v);
        rlk_args_add(a, a->num[a->n], n);
    }
}

/* The calling thread's bound on its commands (rlk_pool_bound), 0 = none. */
static _Thread_local int64_t pool_bound_at;

int64_t rlk_pool_bound(int64_t until_ms)
{
    int64_t old = pool_bound_at;
    if (old == 0 || (until_ms != 0 && until_ms < old)) {
        pool_bound_at = until_ms;
    }
    return old;
}

void rlk_pool_bound_restore(int64_t saved)
{
    pool_bound_at = saved;
}

int64_t rlk_pool_bound_get(void)
{
    return pool_bound_at;
}

/* The time a command may take now: command_timeout_ms, or less under the thread's bound (<= 0:
 * none left). */
static int64_t pool_time_left(const rlock_client *c)
{
    int64_t t = c->opts.command_timeout_ms;
    int64_t left = pool_bound_at != 0 ? pool_bound_at - rlk_now_ms() : t;
    return left < t ? left : t;
}

int rlk_pool_run_on(rlock_client *c, rlk_pool *pool, int flags, rlk_exchange_fn fn, void *arg,
                    redisReply **out)
{
    *out = NULL;
    int r = rlk_client_check(c);
    for (int attempt = 0; r == RLOCK_OK; attempt++) {
        rlk_conn *conn = NULL;
        int64_t left = pool_time_left(c);
        if (left <= 0) {
            return rlk_err(RLOCK_ECONN, "no time left for a command: the call's wait and "
                                        "command_timeout_ms have passed");
        }
        /* A resend follows a broken connection: it must not take another dead one. */
        int64_t dial = left < c->opts.connect_timeout_ms ? left : c->opts.connect_timeout_ms;
        r = pool_borrow_check(pool, dial, attempt > 0, &conn);
        if (r != RLOCK_OK) {
            return r;
        }
        /* Shortened only when that saves more than the clock's millisecond: the commands of an
         * ordinary call (a try_lock without a wait, a wait's attempts) set no socket option. */
        int shortened = left < c->opts.command_timeout_ms - 1;
        if (shortened) {
            (void)rlk_conn_set_timeout(conn, left);
        }
        r = fn(conn, arg, out);
        if (shortened) {
            (void)rlk_conn_set_timeout(conn, c->opts.command_timeout_ms);
        }
        int broken = rlk_conn_broken(conn);
        int resend = r != RLOCK_OK && broken && (flags & RLK_IDEMPOTENT) && attempt == 0 &&
                     rlk_conn_resendable(conn);
        rlk_pool_return(pool, conn, broken);
        if (!resend) {
            return r;
        }
        r = RLOCK_OK;
    }
    return r;
}
