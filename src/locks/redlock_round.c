/*
 * RedLock's parallel round (redlock_round.h): one command per server, all sent before any reply
 * is read, replies collected with poll() under per-server timeouts. Static helpers are named
 * round_*.
 */
#include <assert.h>
#include <poll.h>
#include <string.h>

#include "cluster.h"
#include "cluster_slot.h"
#include "error.h"
#include "redlock_round.h"
#include "scripts.h"

int64_t rlk_round_server_timeout(const rlock *m)
{
    int64_t t = m->client->opts.redlock_server_timeout_ms;
    return t > 0 ? t : 50;
}

void rlk_round_init(rlk_round *r, rlock *const *members, size_t n)
{
    assert(n <= RLK_REDLOCK_MAX); /* rlock_redlock_new() refuses more members */
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->members = members;
}

/* Starts a new command on the servers whose io is active (keys/args filled by the caller). */
void rlk_round_prepare(rlk_round *r, int script)
{
    r->script = script;
    r->need = 0;
    r->hard_deadline = 0;
    for (size_t i = 0; i < r->n; i++) {
        rlk_round_io *io = &r->io[i];
        io->active = 0;
        io->waiting = 0;
        io->retried = 0;
        io->err = RLOCK_OK;
        if (io->reply != NULL) {
            freeReplyObject(io->reply);
            io->reply = NULL;
        }
        rlk_args_init(&io->keys);
        rlk_args_init(&io->args);
    }
}

/* The pool that serves member i: its client's, or on a cluster client the pool of the master
 * that serves the slot of the member's name (every key of one lock lives in that slot). */
static rlk_pool *round_pool(rlk_round *r, size_t i)
{
    const rlock *m = r->members[i];
    rlk_cluster *cl = m->client->cluster;
    if (cl == NULL) {
        return m->client->pool;
    }
    return rlk_cluster_pool(cl, rlk_cluster_key_slot(m->name, m->name_len), &r->io[i].epoch);
}

static int round_flush(rlk_conn *conn)
{
    int done = 0;
    return rlk_conn_flush(conn, &done);
}

/* Appends and flushes io's command. */
static int round_send_one(rlk_round *r, size_t i)
{
    rlk_round_io *io = &r->io[i];
    int rc = RLOCK_OK;
    if (io->conn == NULL) {
        /* A dial (a TLS handshake with a stopped server waits) gets the per-server timeout:
         * the servers are served one after the other here, so one must not delay the rest. */
        io->pool = round_pool(r, i);
        rc =
            io->pool != NULL
                ? rlk_pool_borrow_dial(io->pool, rlk_round_server_timeout(r->members[i]), &io->conn)
                : RLOCK_ENOMEM;
        io->stale = 0;
    }
    if (rc == RLOCK_OK && r->script >= 0) {
        rc = rlk_script_append(io->conn, rlk_script_for(r->members[i]->client, r->script),
                               &io->keys, &io->args);
    } else if (rc == RLOCK_OK) {
        rc = rlk_conn_append(io->conn, io->args.n, io->args.v, io->args.len);
    }
    rc = rc == RLOCK_OK ? round_flush(io->conn) : rc;
    if (rc != RLOCK_OK) {
        io->err = rc;
        io->refresh |= rc == RLOCK_ECONN;
        if (io->conn != NULL) {
            rlk_pool_return(io->pool, io->conn, 1);
            io->conn = NULL;
        }
        return rc;
    }
    io->waiting = !io->stale;
    io->deadline = rlk_now_ms() + rlk_round_server_timeout(r->members[i]);
    return RLOCK_OK;
}

/* Handles a reply: a NOSCRIPT is answered by loading the script (bounded by the per-server
 * timeout) and sending the command again, once. */
static void round_take_reply(rlk_round *r, size_t i, redisReply *rep)
{
    rlk_round_io *io = &r->io[i];
    io->waiting = 0;
    if (r->script >= 0 && !io->retried && rlk_reply_is_noscript(rep)) {
        freeReplyObject(rep);
        io->retried = 1;
        (void)rlk_conn_set_timeout(io->conn, rlk_round_server_timeout(r->members[i]));
        int rc = rlk_script_load(io->conn, rlk_script_for(r->members[i]->client, r->script));
        (void)rlk_conn_set_timeout(io->conn, r->members[i]->client->opts.command_timeout_ms);
        if (rc == RLOCK_OK) {
            (void)round_send_one(r, i);
        } else {
            io->err = rc;
            io->stale = 1; /* the load's reply may still come: never read this connection */
        }
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        rlk_redirect rd;
        io->refresh |= r->members[i]->client->cluster != NULL &&
                       rlk_cluster_parse_redirect(rep->str, rep->len, &rd) == RLK_REDIRECT_MOVED;
        io->err = rlk_err(RLOCK_EREDIS, "RedLock: server %zu: %s", i, rep->str);
        freeReplyObject(rep);
        return;
    }
    io->reply = rep;
}

/* No reply is read from io any more: the connection is only written to from now on. */
static void round_give_up(rlk_round_io *io, int err)
{
    io->waiting = 0;
    io->stale = 1;
    io->err = err;
}

/* Answers received so far in this round (replies, error replies included). */
static int round_answered(const rlk_round *r)
{
    int answered = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rlk_round_io *io = &r->io[i];
        answered += io->active && !io->waiting && !io->stale && io->conn != NULL;
    }
    return answered;
}

/* Reads every awaited reply until it arrived or its server's deadline passed; while fewer than
 * r->need servers answered, the deadlines stretch to r->hard_deadline. */
static void round_collect(rlk_round *r)
{
    struct pollfd pf[RLK_REDLOCK_MAX];
    size_t idx[RLK_REDLOCK_MAX];
    for (;;) {
        for (size_t i = 0; i < r->n; i++) {
            rlk_round_io *io = &r->io[i];
            redisReply *rep = NULL;
            if (!io->waiting || io->conn == NULL) {
                continue;
            }
            int rc = rlk_conn_next(io->conn, &rep);
            if (rc != RLOCK_OK) {
                round_give_up(io, rc);
            } else if (rep != NULL) {
                round_take_reply(r, i, rep);
            }
        }
        /* Decided after taking every reply already read, so a majority that has just answered
         * ends the patience at once. */
        int64_t now = rlk_now_ms();
        int64_t wait = INT64_MAX;
        int patient = round_answered(r) < r->need && now < r->hard_deadline;
        nfds_t nf = 0;
        for (size_t i = 0; i < r->n; i++) {
            rlk_round_io *io = &r->io[i];
            int64_t deadline =
                patient && r->hard_deadline > io->deadline ? r->hard_deadline : io->deadline;
            if (io->waiting && now >= deadline) {
                round_give_up(io, rlk_err(RLOCK_ECONN, "RedLock: no answer from server %zu", i));
            }
            if (io->waiting && io->conn != NULL) {
                pf[nf].fd = rlk_conn_fd(io->conn);
                pf[nf].events = POLLIN;
                pf[nf].revents = 0;
                idx[nf++] = i;
                wait = deadline - now < wait ? deadline - now : wait;
            }
        }
        if (nf == 0) {
            return;
        }
        if (poll(pf, nf, (int)(wait > 0 ? wait : 0)) <= 0) {
            continue;
        }
        for (nfds_t k = 0; k < nf; k++) {
            rlk_round_io *io = &r->io[idx[k]];
            int rc = pf[k].revents != 0 ? rlk_conn_fill(io->conn) : RLOCK_OK;
            if (rc != RLOCK_OK) {
                round_give_up(io, rc);
            }
        }
    }
}

void rlk_round_run(rlk_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->io[i].active) {
            (void)round_send_one(r, i);
        }
    }
    round_collect(r);
}

void rlk_round_end(rlk_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        rlk_round_io *io = &r->io[i];
        if (io->reply != NULL) {
            freeReplyObject(io->reply);
            io->reply = NULL;
        }
        if (io->conn != NULL) {
            rlk_pool_return(io->pool, io->conn, io->stale || io->waiting);
            io->conn = NULL;
        }
        rlk_cluster *cl = r->members[i]->client->cluster;
        if (io->refresh && cl != NULL) {
            (void)rlk_cluster_refresh(cl, io->epoch);
        }
        io->refresh = 0;
    }
}

void rlk_round_patient(rlk_round *r)
{
    int64_t t = 0;
    for (size_t i = 0; i < r->n; i++) {
        int64_t c = r->members[i]->client->opts.command_timeout_ms;
        t = c > t ? c : t;
    }
    r->need = (int)(r->n / 2 + 1);
    r->hard_deadline = rlk_add_sat(rlk_now_ms(), t);
}
