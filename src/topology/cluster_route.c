/*
 * Routing a request on a cluster (see cluster.h): to the master of its slot, following MOVED
 * (map refreshed, request resent), ASK (once after ASKING, map unchanged) and TRYAGAIN or
 * CLUSTERDOWN (short pauses until the command timeout or the call's bound). docs/internals/
 * connections.md explains each answer. Static helpers are named route_*.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster_route.h"
#include "conn.h"
#include "error.h"

/* Redirections followed for one request before giving up: a slot moved twice during one call
 * is rare, a loop between two nodes that disagree is a broken cluster. */
#define RLK_ROUTE_HOPS_MAX 16
/* The pause before a TRYAGAIN or CLUSTERDOWN request is resent. */
#define RLK_ROUTE_PAUSE_MS 10

/* fn after ASKING on the same connection: ASKING lets the next command touch the importing
 * slot. */
typedef struct route_asking {
    rlk_exchange_fn fn;
    void *arg;
} route_asking;

static int route_exchange_asking(rlk_conn *conn, void *arg, redisReply **out)
{
    const route_asking *a = arg;
    const char *argv[1] = {"ASKING"};
    redisReply *ok = NULL;
    int r = rlk_conn_command(conn, 1, argv, NULL, &ok);
    if (r == RLOCK_OK && ok->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "ASKING refused: %s", ok->str);
    }
    freeReplyObject(ok);
    return r ? r : a->fn(conn, a->arg, out);
}

static int route_error_is(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r->len >= n && strncmp(r->str, prefix, n) == 0;
}

static void route_pause(int64_t deadline_ms)
{
    int64_t ms = deadline_ms - rlk_now_ms();
    ms = ms > RLK_ROUTE_PAUSE_MS ? RLK_ROUTE_PAUSE_MS : ms;
    if (ms > 0) {
        struct timespec ts = {0, (long)(ms * 1000000)};
        nanosleep(&ts, NULL);
    }
}

/* Where the next attempt goes, and what the last reply said. */
typedef struct route_state {
    rlk_pool *ask; /* set after an ASK: the next attempt goes there after ASKING */
    char why[160]; /* the last TRYAGAIN/CLUSTERDOWN message */
} route_state;

/* Reads a reply for a redirection. 1: the request must be sent again (the state says where);
 * 0: the reply is the caller's. */
static int route_follow(rlock_client *c, int slot, uint64_t epoch, redisReply *rep, route_state *st)
{
    rlk_cluster *cl = c->cluster;
    if (rep == NULL || rep->type != REDIS_REPLY_ERROR) {
        return 0;
    }
    rlk_redirect rd;
    rlk_redirect_kind kind = rlk_cluster_parse_redirect(rep->str, rep->len, &rd);
    if (kind == RLK_REDIRECT_MOVED) {
        rlk_cluster_count(cl, 1);
        (void)rlk_cluster_refresh(cl, epoch);
        rlk_cluster_note_moved(cl, rd.slot, rd.host, rd.port);
        return 1;
    }
    if (kind == RLK_REDIRECT_ASK) {
        rlk_cluster_count(cl, 2);
        st->ask = rlk_cluster_pool_at(cl, rd.host, rd.port);
        return st->ask != NULL;
    }
    if (route_error_is(rep, "TRYAGAIN") || route_error_is(rep, "CLUSTERDOWN")) {
        rlk_cluster_count(cl, 3);
        snprintf(st->why, sizeof(st->why), "%.*s", (int)rep->len, rep->str);
        return 2;
    }
    if (route_error_is(rep, "READONLY") && slot >= 0) {
        /* The master became a replica (a failover): the map names the new one after a
         * refresh. The request did not run. */
        (void)rlk_cluster_refresh(cl, epoch);
        return 1;
    }
    return 0;
}

/* Reads the map again after a failed request, keeping the request's own error as the last one:
 * it, not the refresh's, is what the caller reports. */
static void route_refresh_after_failure(rlk_cluster *cl, uint64_t epoch)
{
    char saved[256];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    (void)rlk_cluster_refresh_after_failure(cl, epoch);
    rlk_err_restore(saved);
}

int rlk_cluster_run(rlock_client *c, int slot, int flags, rlk_exchange_fn fn, void *arg,
                    redisReply **out)
{
    rlk_cluster *cl = c->cluster;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), c->opts.command_timeout_ms);
    int64_t bound = rlk_pool_bound_get();
    /* A lock call's bound (pool.h) also ends the resends: past it no command may go out. */
    deadline = bound > 0 && bound < deadline ? bound : deadline;
    route_state st = {.ask = NULL, .why = ""};
    for (int hop = 0;; hop++) {
        uint64_t epoch = 0;
        rlk_pool *pool = st.ask != NULL ? st.ask : rlk_cluster_pool(cl, slot, &epoch);
        if (pool == NULL) {
            return RLOCK_ENOMEM;
        }
        route_asking asking = {fn, arg};
        int r = st.ask != NULL
                    ? rlk_pool_run_on(c, pool, flags, route_exchange_asking, &asking, out)
                    : rlk_pool_run_on(c, pool, flags, fn, arg, out);
        st.ask = NULL;
        if (r != RLOCK_OK) {
            /* A node that cannot be reached may have failed over or left: the next request
             * should find the map as the cluster sees it now. */
            if (r == RLOCK_ECONN) {
                route_refresh_after_failure(cl, epoch);
            }
            return r;
        }
        int again = route_follow(c, slot, epoch, *out, &st);
        if (again == 0) {
            return RLOCK_OK;
        }
        freeReplyObject(*out);
        *out = NULL;
        if (again == 2) {
            route_pause(deadline); /* bounded by the deadline, not counted as a redirection */
            if (rlk_now_ms() >= deadline) {
                return rlk_err(RLOCK_ECONN, "cluster: %s (for %lld ms)", st.why,
                               (long long)c->opts.command_timeout_ms);
            }
            hop--;
        } else if (hop >= RLK_ROUTE_HOPS_MAX) {
            return rlk_err(RLOCK_ECONN, "cluster: more than %d redirections for slot %d",
                           RLK_ROUTE_HOPS_MAX, slot);
        }
    }
}
