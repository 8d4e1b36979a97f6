/*
 * Master discovery through Sentinel. Every Sentinel is asked in the URL's order, so a deployment
 * keeps working while any one of them answers; what each one failed with is collected into the
 * final RLOCK_ECONN, because "all Sentinels unreachable" alone does not say which address or
 * password is wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_open.h"
#include "error.h"
#include "pool.h"
#include "replica.h"
#include "sentinel.h"

/* The detail of the last error without its "<code's message>: " prefix. */
static const char *sentinel_detail(int code)
{
    const char *msg = rlock_last_error();
    size_t n = strlen(rlock_strerror(code));
    return strncmp(msg, rlock_strerror(code), n) == 0 && msg[n] == ':' ? msg + n + 2 : msg;
}

int rlk_sentinel_parse_addr(const char *master_name, const redisReply *r, char *host, int *port)
{
    if (r->type == REDIS_REPLY_NIL) {
        return rlk_err(RLOCK_EPROTO, "does not know a master named '%s'", master_name);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        return rlk_err(RLOCK_EREDIS, "refused SENTINEL get-master-addr-by-name: %s", r->str);
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= RLK_HOST_MAX) {
        return rlk_err(RLOCK_EPROTO, "answered get-master-addr-by-name with no address");
    }
    char *end = NULL;
    long p = strtol(r->element[1]->str, &end, 10);
    if (end == r->element[1]->str || *end != '\0' || p < 1 || p > 65535) {
        return rlk_err(RLOCK_EPROTO, "named a master with an invalid port");
    }
    memcpy(host, r->element[0]->str, r->element[0]->len + 1);
    *port = (int)p;
    return RLOCK_OK;
}

int rlk_sentinel_role_is_master(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
           r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
}

/* Dials ep, runs one command bounded by deadline and closes the connection: *out is the reply
 * (an error reply included) on RLOCK_OK. */
static int sentinel_query(rlock_client *c, const rlk_endpoint *ep, int64_t deadline, int argc,
                          const char *const *argv, redisReply **out)
{
    rlk_conn *conn = NULL;
    int64_t left = deadline - rlk_now_ms();
    int r = rlk_conn_open_at(c, ep, deadline, left < 1 ? 1 : left, &conn);
    if (r != RLOCK_OK) {
        return r;
    }
    r = rlk_conn_command(conn, argc, argv, NULL, out);
    rlk_conn_close(conn);
    return r;
}

/* Asks one Sentinel for the master's address. */
static int sentinel_ask(rlock_client *c, const rlk_url_host *s, int64_t deadline, char *host,
                        int *port)
{
    rlk_endpoint ep = {.host = s->host,
                       .port = s->port,
                       .user = c->sentinel_user,
                       .password = c->sentinel_password,
                       .tls = c->url.tls};
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", c->url.master_name};
    redisReply *rep = NULL;
    int r = sentinel_query(c, &ep, deadline, 3, argv, &rep);
    r = r ? r : rlk_sentinel_parse_addr(c->url.master_name, rep, host, port);
    freeReplyObject(rep);
    return r;
}

/* Dials the node a Sentinel named with the data nodes' credentials and checks that ROLE says
 * master: a Sentinel may still name the old master during a failover. */
static int sentinel_confirm(rlock_client *c, const char *host, int port, int64_t deadline)
{
    rlk_endpoint ep = {.host = host,
                       .port = port,
                       .user = c->url.user,
                       .password = c->url.password,
                       .db = c->url.db,
                       .tls = c->url.tls};
    const char *argv[1] = {"ROLE"};
    redisReply *rep = NULL;
    int r = sentinel_query(c, &ep, deadline, 1, argv, &rep);
    if (r == RLOCK_OK && !rlk_sentinel_role_is_master(rep)) {
        r = rlk_err(RLOCK_EPROTO, "named %s:%d, which is not a master (ROLE)", host, port);
    }
    freeReplyObject(rep);
    return r;
}

/* Appends "host:port: why" of a failed Sentinel to the report. */
static void sentinel_note(rlk_buf *report, const rlk_url_host *s, int code)
{
    char line[320];
    snprintf(line, sizeof(line), "%s%s:%d: %s", report->len > 0 ? "; " : "", s->host, s->port,
             sentinel_detail(code));
    (void)rlk_buf_appends(report, line);
}

/* Finds the master (see rlk_sentinel_discover()) into host and port. */
static int sentinel_find(rlock_client *c, int64_t deadline_ms, char *host, int *port)
{
    rlk_buf report;
    rlk_buf_init(&report);
    int r = RLOCK_ECONN;
    for (size_t i = 0; i < c->url.nhosts; i++) {
        const rlk_url_host *s = &c->url.hosts[i];
        /* A Sentinel that swallows packets must leave time to ask the others. */
        int64_t now = rlk_now_ms();
        int64_t share = (deadline_ms - now) / (int64_t)(c->url.nhosts - i);
        int64_t until = now + (share < 1 ? 1 : share);
        r = sentinel_ask(c, s, until, host, port);
        if (r == RLOCK_OK) {
            r = sentinel_confirm(c, host, *port, until);
            if (r == RLOCK_EAUTH) {
                break; /* the master refused the data nodes' credentials: no Sentinel helps */
            }
        }
        if (r == RLOCK_OK) {
            break;
        }
        sentinel_note(&report, s, r);
    }
    if (r != RLOCK_OK && r != RLOCK_EAUTH) {
        r = rlk_err(RLOCK_ECONN, "no Sentinel named a reachable master '%s': %s",
                    c->url.master_name, report.p);
    }
    rlk_buf_free(&report);
    return r;
}

int rlk_sentinel_discover(rlock_client *c, int64_t deadline_ms)
{
    char host[RLK_HOST_MAX];
    int port = 0;
    int r = sentinel_find(c, deadline_ms, host, &port);
    if (r == RLOCK_OK) {
        rlk_client_set_master(c, host, port);
    }
    return r;
}

/* Moves the client to a new master: the pool drops what it dialled to the old one (the watchdog
 * borrows from the pool, so it follows), the master generation moves the subscriber (its thread
 * compares it with the one it dialled under, resubscribes the channels of current waiters on the
 * new master, and their confirmations wake every waiter to re-attempt once), and the replica
 * count is read from the new master before the next grant waits for replicas the old one had.
 * Both ways of learning of a failover (a recheck after a failed command, a +switch-master event)
 * end here. */
static void sentinel_switch(rlock_client *c, const char *host, int port)
{
    rlk_log(c, RLOCK_LOG_WARN, "Sentinel: master '%s' is now %s:%d", c->url.master_name, host,
            port);
    rlk_client_set_master(c, host, port);
    rlk_pool_reset(c->pool);
    rlk_conn *conn = NULL;
    if (rlk_pool_borrow(c->pool, &conn) == RLOCK_OK) {
        int r = rlk_replica_refresh(c, conn);
        rlk_pool_return(c->pool, conn, r != RLOCK_OK);
    }
    rlk_obs_failover(c, host, port);
}

/* The bound of one recheck or switch: the shorter of the two timeouts. */
static int64_t sentinel_bound(const rlock_client *c)
{
    return c->opts.command_timeout_ms < c->opts.connect_timeout_ms ? c->opts.command_timeout_ms
                                                                   : c->opts.connect_timeout_ms;
}

/* 1 if host:port is the client's master already. */
static int sentinel_is_current(const rlock_client *c, const char *host, int port)
{
    char cur[RLK_HOST_MAX];
    rlk_endpoint ep;
    rlk_client_endpoint(c, &ep, cur);
    return strcmp(cur, host) == 0 && ep.port == port;
}

void rlk_sentinel_recheck(rlock_client *c)
{
    if (c->url.kind != RLK_URL_SENTINEL || c->pool == NULL) {
        return;
    }
    long long due = atomic_load(&c->recheck_at);
    long long now = rlk_now_ms();
    /* One thread asks at a time, at most every RLK_SENTINEL_RECHECK_MS: a failover makes every
     * caller fail at once, and one answer serves them all. */
    if (now < due ||
        !atomic_compare_exchange_strong(&c->recheck_at, &due, now + RLK_SENTINEL_RECHECK_MS)) {
        return;
    }
    char host[RLK_HOST_MAX], saved[512];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    int port = 0;
    /* With no master found (an election is running) the next failure asks again. */
    if (sentinel_find(c, rlk_add_sat(now, sentinel_bound(c)), host, &port) == RLOCK_OK &&
        !sentinel_is_current(c, host, port)) {
        sentinel_switch(c, host, port);
    }
    /* The caller reports its own failure, not what the Sentinels said. */
    rlk_err_restore(saved);
}

int rlk_sentinel_switch_to(rlock_client *c, const char *host, int port)
{
    if (c->url.kind != RLK_URL_SENTINEL || c->pool == NULL || sentinel_is_current(c, host, port)) {
        return RLOCK_OK;
    }
    char saved[512];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    /* The event names the node the Sentinels just promoted; another Sentinel may still name the
     * old master (which may still say master until it is reconfigured), so the event's address
     * is confirmed itself instead of asking the Sentinels in turn. */
    int r = sentinel_confirm(c, host, port, rlk_add_sat(rlk_now_ms(), sentinel_bound(c)));
    if (r == RLOCK_OK) {
        sentinel_switch(c, host, port);
    } else {
        rlk_log(c, RLOCK_LOG_WARN, "Sentinel: +switch-master named %s:%d: %s", host, port,
                rlock_last_error());
    }
    rlk_err_restore(saved);
    return r;
}
