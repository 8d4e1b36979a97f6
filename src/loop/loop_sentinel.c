/*
 * A loop client's Sentinel state (loop_sentinel.h): the non-blocking twin of sentinel.c and
 * sentinel_watch.c, parsing with their pure functions. One probe at a time (a question to a
 * Sentinel or the ROLE check of the node named), each on a short-lived loop connection; the
 * +switch-master subscription on another. Static helpers are named sen_*.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "loop_sentinel.h"
#include "observe.h"
#include "sentinel.h"
#include "sentinel_watch.h"

/* The pause after a failed dial of the subscription, and between two ROLE checks of an
 * announced master that did not answer as one (as sentinel_watch.c). */
#define SEN_RETRY_MS 500
/* How long an announced master is tried before the recheck on errors is left to find it. */
#define SEN_PENDING_MS 10000

struct rlk_loop_sentinel {
    rlk_loop_client *lc;
    rlk_loop_moved_fn moved; /* loop_client.c's move to the master found (rlk_loop_moved) */
    void *timer;             /* starts a round, redials the watch, retries an announcement */
    int64_t timer_due;       /* monotonic ms the timer is armed for, INT64_MAX: not armed */
    rlk_lconn *probe;        /* the question or ROLE check in flight, NULL: none */
    int busy;                /* a round or a check is under way (or due at the next timer) */
    int kick;                /* a round starts at the next timer */
    int round;               /* 1: asking the Sentinels in turn; 0: checking an announced master */
    size_t next;             /* the Sentinel asked next in this round */
    int64_t ask_at;          /* monotonic ms before which no new round starts */
    char host[RLK_HOST_MAX]; /* the node being checked */
    int port;
    rlk_lconn *watch;                /* subscribed to +switch-master, NULL while not */
    size_t wnext;                    /* the Sentinel the watch dials next */
    int dropped;                     /* a subscription was lost: a switch may have been missed */
    char pending_host[RLK_HOST_MAX]; /* an announced master not confirmed yet ("": none) */
    int pending_port;
    int64_t pending_until;
    int depth; /* callbacks of this state running now */
    int freed; /* rlk_loop_sentinel_free() ran inside one of them */
};

static void sen_enter(rlk_loop_sentinel *s)
{
    s->depth++;
}

/* 1 when the state is gone (freed inside the callback, by a done that freed the client). */
static int sen_leave(rlk_loop_sentinel *s)
{
    if (--s->depth == 0 && s->freed) {
        free(s);
        return 1;
    }
    return s->freed;
}

/* A connection to a Sentinel (sentinel 1: the Sentinels' credentials) or to a data node. */
static int sen_dial(rlk_loop_sentinel *s, const char *host, int port, int sentinel,
                    const rlk_lconn_cbs *cbs, rlk_lconn **out)
{
    const rlock_client *c = s->lc->c;
    rlk_url u = c->url;
    u.host = (char *)host;
    u.port = port;
    if (sentinel) {
        u.user = c->sentinel_user;
        u.password = c->sentinel_password;
        u.db = 0;
    }
    return rlk_lconn_new(&s->lc->loop, &u, cbs, out);
}

static rlk_lconn_cbs sen_cbs(const rlk_loop_sentinel *s)
{
    const rlock_options *o = &s->lc->c->opts;
    int64_t bound = o->command_timeout_ms < o->connect_timeout_ms ? o->command_timeout_ms
                                                                  : o->connect_timeout_ms;
    return (rlk_lconn_cbs){
        .connect_timeout_ms = bound, .command_timeout_ms = bound, .tls = s->lc->c->tls};
}

/* Arms the timer for ms from now, unless it rings sooner already (one timer serves all). */
static void sen_arm(rlk_loop_sentinel *s, int64_t ms)
{
    int64_t due = rlk_now_ms() + ms;
    if (due < s->timer_due) {
        s->timer_due = due;
        (void)s->lc->loop.timer_start(s->timer, ms);
    }
}

static int sen_is_current(const rlk_loop_sentinel *s, const char *host, int port)
{
    char cur[RLK_HOST_MAX];
    int cport = 0;
    rlk_client_master(s->lc->c, cur, &cport);
    return strcmp(cur, host) == 0 && cport == port;
}

/* The Sentinels name host:port, confirmed by ROLE: the client's master from now on. A change of
 * a known master is a failover, counted as the threaded client counts it (sentinel.c). */
static void sen_found(rlk_loop_sentinel *s, const char *host, int port)
{
    rlock_client *c = s->lc->c;
    if (strcmp(s->pending_host, host) == 0 && s->pending_port == port) {
        s->pending_host[0] = '\0';
    }
    if (sen_is_current(s, host, port)) {
        return;
    }
    char cur[RLK_HOST_MAX];
    int cport = 0;
    rlk_client_master(c, cur, &cport);
    if (cur[0] != '\0') {
        rlk_log(c, RLOCK_LOG_WARN, "Sentinel: master '%s' is now %s:%d", c->url.master_name, host,
                port);
    }
    rlk_client_set_master(c, host, port);
    if (cur[0] != '\0') {
        rlk_obs_failover(c, host, port);
    }
    s->moved(s->lc, RLOCK_OK);
}

static void sen_ask_next(rlk_loop_sentinel *s);

/* A round found no master: with none known yet, what waits for one fails. */
static void sen_round_failed(rlk_loop_sentinel *s)
{
    rlock_client *c = s->lc->c;
    s->busy = 0;
    if (s->pending_host[0] != '\0') { /* an announcement that came meanwhile */
        sen_arm(s, SEN_RETRY_MS);
    }
    char cur[RLK_HOST_MAX];
    int cport = 0;
    rlk_client_master(c, cur, &cport);
    if (cur[0] == '\0') {
        s->moved(s->lc, rlk_err(RLOCK_ECONN, "no Sentinel named a reachable master '%s'",
                                c->url.master_name));
    }
}

/* A probe ended without an answer that helps: the round asks the next Sentinel, an
 * announcement is tried again later. */
static void sen_probe_failed(rlk_loop_sentinel *s, const char *what)
{
    rlk_log(s->lc->c, RLOCK_LOG_WARN, "Sentinel: %s: %s", what, rlock_last_error());
    if (s->round) {
        s->next++;
        sen_ask_next(s);
        return;
    }
    s->busy = 0;
    sen_arm(s, SEN_RETRY_MS);
}

static void sen_role_done(rlk_loop_sentinel *s, redisReply *rep, int err)
{
    rlk_lconn_free(s->probe, RLOCK_ECLOSED);
    s->probe = NULL;
    if (err == RLOCK_OK && !rlk_sentinel_role_is_master(rep)) {
        err = rlk_err(RLOCK_EPROTO, "%s:%d is not a master (ROLE)", s->host, s->port);
    }
    if (err != RLOCK_OK) {
        sen_probe_failed(s, "a named master did not answer as one");
        return;
    }
    s->busy = 0;
    sen_found(s, s->host, s->port);
    if (!s->freed && s->pending_host[0] != '\0') {
        sen_arm(s, 0);
    }
}

/* A probe's reply runs what may free the client (and so this state) through a done. */
static void sen_role_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_sentinel *s = arg;
    if (s->freed) {
        return;
    }
    sen_enter(s);
    sen_role_done(s, rep, err);
    (void)sen_leave(s);
}

/* Checks with ROLE that s->host:s->port is a master (a Sentinel may still name the old one). */
static void sen_check(rlk_loop_sentinel *s)
{
    rlk_lconn_cbs cbs = sen_cbs(s);
    int r = sen_dial(s, s->host, s->port, 0, &cbs, &s->probe);
    const char *argv[1] = {"ROLE"};
    r = r ? r : rlk_lconn_command(s->probe, 1, argv, NULL, sen_role_reply, s);
    if (r != RLOCK_OK) {
        rlk_lconn_free(s->probe, RLOCK_ECLOSED);
        s->probe = NULL;
        sen_probe_failed(s, "cannot check a named master");
    }
}

static void sen_ask_done(rlk_loop_sentinel *s, redisReply *rep, int err)
{
    rlk_lconn_free(s->probe, RLOCK_ECLOSED);
    s->probe = NULL;
    const char *name = s->lc->c->url.master_name;
    if (err == RLOCK_OK) {
        err = rlk_sentinel_parse_addr(name, rep, s->host, &s->port);
    }
    if (err != RLOCK_OK) {
        sen_probe_failed(s, "a Sentinel named no master");
        return;
    }
    sen_check(s);
}

static void sen_ask_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_sentinel *s = arg;
    if (s->freed) {
        return;
    }
    sen_enter(s);
    sen_ask_done(s, rep, err);
    (void)sen_leave(s);
}

/* Asks the Sentinel h for the master: RLOCK_OK while the question is in flight. */
static int sen_ask(rlk_loop_sentinel *s, const rlk_url_host *h)
{
    rlk_lconn_cbs cbs = sen_cbs(s);
    int r = sen_dial(s, h->host, h->port, 1, &cbs, &s->probe);
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->lc->c->url.master_name};
    r = r ? r : rlk_lconn_command(s->probe, 3, argv, NULL, sen_ask_reply, s);
    if (r != RLOCK_OK) {
        rlk_lconn_free(s->probe, RLOCK_ECLOSED);
        s->probe = NULL;
    }
    return r;
}

/* Asks the round's Sentinels from s->next on until a question is in flight; past the last one
 * the round failed. */
static void sen_ask_next(rlk_loop_sentinel *s)
{
    const rlk_url *url = &s->lc->c->url;
    for (; s->next < url->nhosts; s->next++) {
        if (sen_ask(s, &url->hosts[s->next]) == RLOCK_OK) {
            return;
        }
        rlk_log(s->lc->c, RLOCK_LOG_WARN, "Sentinel: cannot ask a Sentinel: %s",
                rlock_last_error());
    }
    sen_round_failed(s);
}

/* Starts a round at the next timer: nothing runs inside the caller's call. */
static void sen_kick(rlk_loop_sentinel *s)
{
    s->busy = 1;
    s->kick = 1;
    s->ask_at = rlk_now_ms() + RLK_SENTINEL_RECHECK_MS;
    sen_arm(s, 0);
}

int rlk_loop_sentinel_need(rlk_loop_sentinel *s)
{
    if (s == NULL) { /* the client is being freed */
        return rlk_err(RLOCK_ECLOSED, "the client was freed");
    }
    if (s->busy) {
        return RLOCK_OK;
    }
    if (rlk_now_ms() < s->ask_at) {
        return rlk_err(RLOCK_ECONN,
                       "no Sentinel named a reachable master '%s' (asked again "
                       "shortly)",
                       s->lc->c->url.master_name);
    }
    sen_kick(s);
    return RLOCK_OK;
}

void rlk_loop_sentinel_recheck(rlk_loop_sentinel *s)
{
    if (s != NULL && !s->busy && rlk_now_ms() >= s->ask_at) {
        sen_kick(s);
    }
}

/* ---- the +switch-master subscription ------------------------------------------------- */

/* An announced master is checked with ROLE before the client moves there. */
static void sen_announced(rlk_loop_sentinel *s, const char *host, int port)
{
    if (sen_is_current(s, host, port)) {
        return;
    }
    if (strcmp(s->pending_host, host) != 0 || s->pending_port != port) {
        memcpy(s->pending_host, host, strlen(host) + 1);
        s->pending_port = port;
        s->pending_until = rlk_now_ms() + SEN_PENDING_MS;
    }
    sen_arm(s, 0);
}

static void sen_watch_push(void *arg, redisReply *rep)
{
    rlk_loop_sentinel *s = arg;
    char host[RLK_HOST_MAX];
    int port = 0;
    const char *kind = rep->element[0]->str;
    if (strcmp(kind, "subscribe") == 0 && s->dropped) {
        /* A failover announced while no Sentinel was subscribed is found by asking. */
        s->dropped = 0;
        rlk_loop_sentinel_recheck(s);
    } else if (rlk_sentinel_parse_switch(s->lc->c->url.master_name, rep, host, &port)) {
        sen_announced(s, host, port);
    }
}

static void sen_watch_down(void *arg, int err)
{
    rlk_loop_sentinel *s = arg;
    const rlk_url_host *h = &s->lc->c->url.hosts[s->wnext];
    rlk_log(s->lc->c, RLOCK_LOG_WARN, "Sentinel %s:%d: +switch-master subscription lost: %s",
            h->host, h->port, rlock_strerror(err));
    rlk_lconn_free(s->watch, err);
    s->watch = NULL;
    s->wnext = (s->wnext + 1) % s->lc->c->url.nhosts;
    s->dropped = 1;
    sen_arm(s, SEN_RETRY_MS);
}

/* Subscribes to +switch-master on the Sentinel s->wnext. */
static void sen_watch_dial(rlk_loop_sentinel *s)
{
    const rlk_url_host *h = &s->lc->c->url.hosts[s->wnext];
    rlk_lconn_cbs cbs = sen_cbs(s);
    cbs.command_timeout_ms = 0; /* no reply comes to SUBSCRIBE's request slot */
    cbs.push = sen_watch_push;
    cbs.down = sen_watch_down;
    cbs.arg = s;
    int r = sen_dial(s, h->host, h->port, 1, &cbs, &s->watch);
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    r = r ? r : rlk_lconn_command(s->watch, 2, argv, NULL, NULL, NULL);
    if (r != RLOCK_OK) {
        rlk_lconn_free(s->watch, RLOCK_ECLOSED);
        s->watch = NULL;
        s->wnext = (s->wnext + 1) % s->lc->c->url.nhosts;
        s->dropped = 1;
        sen_arm(s, SEN_RETRY_MS);
    }
}

/* The timer: a round that is due, the watch's redial, an announcement to check (again). */
static void sen_on_timer(void *arg)
{
    rlk_loop_sentinel *s = arg;
    s->timer_due = INT64_MAX;
    sen_enter(s);
    if (s->watch == NULL) {
        sen_watch_dial(s);
    }
    if (s->kick) {
        s->kick = 0;
        s->round = 1;
        s->next = 0;
        sen_ask_next(s);
    } else if (!s->busy && s->pending_host[0] != '\0') {
        if (rlk_now_ms() >= s->pending_until) {
            s->pending_host[0] = '\0';
        } else {
            s->busy = 1;
            s->round = 0;
            memcpy(s->host, s->pending_host, sizeof(s->host));
            s->port = s->pending_port;
            sen_check(s);
        }
    }
    (void)sen_leave(s);
}

int rlk_loop_sentinel_new(rlk_loop_client *lc, rlk_loop_moved_fn moved, rlk_loop_sentinel **out)
{
    rlk_loop_sentinel *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->timer = lc->loop.timer_new(lc->loop.loop_data, sen_on_timer, s)) == NULL) {
        free(s);
        return rlk_err(RLOCK_ENOMEM, "cannot make a loop client's Sentinel state");
    }
    s->lc = lc;
    s->moved = moved;
    s->timer_due = INT64_MAX;
    sen_arm(s, 0); /* the subscription is dialled on the loop */
    *out = s;
    return RLOCK_OK;
}

void rlk_loop_sentinel_free(rlk_loop_sentinel *s)
{
    if (s == NULL) {
        return;
    }
    s->freed = 1;
    rlk_lconn_free(s->probe, RLOCK_ECLOSED);
    rlk_lconn_free(s->watch, RLOCK_ECLOSED);
    s->lc->loop.timer_free(s->timer);
    if (s->depth == 0) {
        free(s);
    }
}
