/*
 * The +switch-master subscription of a Sentinel deployment: one connection to one Sentinel, so
 * that the client moves to a new master as soon as it is promoted. The subscriber thread owns
 * and polls it beside its data connection; docs/internals/subscriber.md says why it has no
 * thread of its own.
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "conn_open.h"
#include "error.h"
#include "sentinel.h"
#include "sentinel_watch.h"

/* The longest a dial of a Sentinel may hold the subscriber thread. */
#define RLK_SENTINEL_WATCH_DIAL_MS 500
/* The pause after a failed dial before the next Sentinel is tried, and between two ROLE checks
 * of an announced master that did not answer as one. */
#define RLK_SENTINEL_WATCH_RETRY_MS 500
/* How long an announced master is tried before the recheck on errors is left to find it. */
#define RLK_SENTINEL_WATCH_PENDING_MS 10000

#define SWITCH_CHANNEL "+switch-master"

/* 1 if r is the confirmation of SUBSCRIBE +switch-master. */
static int watch_confirmed(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[0]->str, "subscribe") == 0;
}

/* Dials the Sentinel w->next with the Sentinels' credentials and subscribes. */
static int watch_dial(rlock_client *c, rlk_sentinel_watch *w)
{
    const rlk_url_host *s = &c->url.hosts[w->next];
    rlk_endpoint ep = {.host = s->host,
                       .port = s->port,
                       .user = c->sentinel_user,
                       .password = c->sentinel_password,
                       .tls = c->url.tls};
    int64_t bound = c->opts.connect_timeout_ms < RLK_SENTINEL_WATCH_DIAL_MS
                        ? c->opts.connect_timeout_ms
                        : RLK_SENTINEL_WATCH_DIAL_MS;
    rlk_conn *conn = NULL;
    int r = rlk_conn_open_at(c, &ep, rlk_add_sat(rlk_now_ms(), bound), bound, &conn);
    if (r != RLOCK_OK) {
        return r;
    }
    const char *argv[2] = {"SUBSCRIBE", SWITCH_CHANNEL};
    redisReply *rep = NULL;
    r = rlk_conn_command(conn, 2, argv, NULL, &rep);
    if (r == RLOCK_OK && !watch_confirmed(rep)) {
        r = rlk_err(RLOCK_EPROTO, "Sentinel %s:%d refused SUBSCRIBE %s", s->host, s->port,
                    SWITCH_CHANNEL);
    }
    freeReplyObject(rep);
    if (r != RLOCK_OK) {
        rlk_conn_close(conn);
        return r;
    }
    w->conn = conn;
    return RLOCK_OK;
}

/* Moves to an announced master; one whose ROLE check failed is kept and tried again at the next
 * rounds of the subscriber thread for RLK_SENTINEL_WATCH_PENDING_MS. */
static void watch_move(rlock_client *c, rlk_sentinel_watch *w, const char *host, int port)
{
    if (rlk_sentinel_switch_to(c, host, port) == RLOCK_OK) {
        w->pending_host[0] = '\0';
        return;
    }
    if (w->pending_host[0] == '\0' || strcmp(w->pending_host, host) != 0 ||
        w->pending_port != port) {
        snprintf(w->pending_host, sizeof(w->pending_host), "%s", host);
        w->pending_port = port;
        w->pending_until = rlk_now_ms() + RLK_SENTINEL_WATCH_PENDING_MS;
    }
}

/* Tries a pending announcement again, at most every RLK_SENTINEL_WATCH_RETRY_MS. */
static void watch_retry_pending(rlock_client *c, rlk_sentinel_watch *w)
{
    int64_t now = rlk_now_ms();
    if (w->pending_host[0] == '\0' || now < w->pending_retry_at) {
        return;
    }
    if (now >= w->pending_until) {
        w->pending_host[0] = '\0';
        return;
    }
    w->pending_retry_at = now + RLK_SENTINEL_WATCH_RETRY_MS;
    char host[RLK_HOST_MAX];
    memcpy(host, w->pending_host, sizeof(host));
    watch_move(c, w, host, w->pending_port);
}

int rlk_sentinel_watch_fd(rlock_client *c, rlk_sentinel_watch *w)
{
    if (c->url.kind != RLK_URL_SENTINEL || c->url.nhosts == 0) {
        return -1;
    }
    watch_retry_pending(c, w);
    if (w->conn != NULL) {
        return rlk_conn_fd(w->conn);
    }
    int64_t now = rlk_now_ms();
    if (now < w->retry_at) {
        return -1;
    }
    char saved[512];
    snprintf(saved, sizeof(saved), "%s", rlock_last_error());
    if (watch_dial(c, w) != RLOCK_OK) {
        rlk_log(c, RLOCK_LOG_WARN, "Sentinel %s:%d: cannot subscribe to %s: %s",
                c->url.hosts[w->next].host, c->url.hosts[w->next].port, SWITCH_CHANNEL,
                rlock_last_error());
        w->next = (w->next + 1) % c->url.nhosts;
        w->retry_at = now + RLK_SENTINEL_WATCH_RETRY_MS;
        rlk_err_restore(saved);
        return -1;
    }
    if (w->dropped) {
        /* A failover announced while no Sentinel was subscribed is found by asking. */
        w->dropped = 0;
        rlk_sentinel_recheck(c);
    }
    rlk_err_restore(saved);
    return rlk_conn_fd(w->conn);
}

int rlk_sentinel_parse_switch(const char *master_name, const redisReply *m, char *host, int *port)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[0]->type != REDIS_REPLY_STRING || strcmp(m->element[0]->str, "message") != 0 ||
        m->element[2]->type != REDIS_REPLY_STRING || m->element[2]->len >= 1024) {
        return 0;
    }
    char text[1024];
    memcpy(text, m->element[2]->str, m->element[2]->len + 1);
    char *words[5] = {NULL};
    char *save = NULL;
    int n = 0;
    for (char *w = strtok_r(text, " ", &save); w != NULL && n < 5; w = strtok_r(NULL, " ", &save)) {
        words[n++] = w;
    }
    char *end = NULL;
    long p = n == 5 ? strtol(words[4], &end, 10) : 0;
    if (n != 5 || *end != '\0' || p < 1 || p > 65535 || strcmp(words[0], master_name) != 0 ||
        strlen(words[3]) >= RLK_HOST_MAX) {
        return 0;
    }
    memcpy(host, words[3], strlen(words[3]) + 1);
    *port = (int)p;
    return 1;
}

void rlk_sentinel_watch_read(rlock_client *c, rlk_sentinel_watch *w)
{
    if (w->conn == NULL) {
        return;
    }
    char host[RLK_HOST_MAX] = "";
    int port = 0;
    int r = rlk_conn_fill(w->conn);
    redisReply *rep = NULL;
    while (r == RLOCK_OK && rlk_conn_next(w->conn, &rep) == RLOCK_OK && rep != NULL) {
        (void)rlk_sentinel_parse_switch(c->url.master_name, rep, host,
                                        &port); /* the last announcement wins */
        freeReplyObject(rep);
        rep = NULL;
    }
    if (r != RLOCK_OK || rlk_conn_broken(w->conn)) {
        rlk_log(c, RLOCK_LOG_WARN, "Sentinel %s:%d: %s subscription lost: %s",
                c->url.hosts[w->next].host, c->url.hosts[w->next].port, SWITCH_CHANNEL,
                rlock_last_error());
        rlk_conn_close(w->conn);
        w->conn = NULL;
        w->next = (w->next + 1) % c->url.nhosts;
        w->dropped = 1;
    }
    if (port != 0) {
        watch_move(c, w, host, port);
    }
}

void rlk_sentinel_watch_close(rlk_sentinel_watch *w)
{
    rlk_conn_close(w->conn);
    w->conn = NULL;
}

void rlk_sentinel_watch_abandon(rlk_sentinel_watch *w)
{
    rlk_conn_abandon(w->conn);
    w->conn = NULL;
}
