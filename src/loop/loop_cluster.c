/*
 * A loop client's Redis Cluster (loop_cluster.h). The map is read with CLUSTER SLOTS, decoded
 * by cluster_map.c as a threaded cluster client decodes it; the first read asks each seed in
 * turn, later ones (after a MOVED or a broken node connection, at most one in flight and at
 * most every RLK_CLUSTER_FAILURE_REFRESH_GAP_MS) ask the home node. Node records live as long
 * as the state: a request keeps no pointer to one. Static helpers are named lcl_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_map.h"
#include "error.h"
#include "loop_cluster.h"
#include "loop_route.h"
#include "loop_shard.h"
#include "scripts.h"
#include "util.h"

/* A master, once named by a map or a redirection, and its data connection. */
typedef struct lcl_node {
    struct lcl_node *next;
    rlk_loop_cluster *cl;
    rlk_lconn *conn;       /* NULL until needed, and after a failure until needed again */
    int64_t backoff_ms;    /* the wait after the last dial that got no reply (0: none) */
    int64_t retry_at;      /* monotonic ms before which no dial is made */
    rlk_replicas replicas; /* its replicas online (loop_sync.c) */
    int port;
    char host[];
} lcl_node;

/* A request queued until the first map is known. */
typedef struct lcl_req {
    struct lcl_req *next;
    int slot;
    int script; /* the script of an EVALSHA request (its SHA set by the mode), -1: none */
    rlk_lconn_reply_fn fn;
    void *arg;
    size_t len;
    char cmd[];
} lcl_req;

struct rlk_loop_cluster {
    rlk_loop_client *lc;
    rlk_loop_moved_fn moved;
    rlk_cluster_map map;
    int known;      /* a map was read (and the pub/sub mode is known) */
    int mode_known; /* the pub/sub mode is decided (forced by the option, or probed) */
    lcl_node *nodes;
    lcl_req *queue, **tail;
    rlk_lconn *probe;   /* the first read's connection to a seed */
    size_t seed;        /* the seed it asks */
    int reading;        /* a read is in flight */
    int64_t read_at;    /* when the last refresh began (monotonic ms) */
    int64_t retry_at;   /* after a first read that found no map: no new one before then */
    int64_t backoff_ms; /* that read's back-off: 50 ms, doubling up to 2 s */
    char why[400];      /* each seed's failure in the read under way */
};

static void lcl_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

/* A connection's URL: the client's (credentials, TLS) aimed at host:port. */
static rlk_url lcl_url(const rlk_loop_cluster *cl, const char *host, int port)
{
    rlk_url u = cl->lc->c->url;
    u.kind = RLK_URL_STANDALONE;
    u.host = (char *)host;
    u.port = port;
    u.path = NULL;
    return u;
}

static rlk_lconn_cbs lcl_cbs(const rlk_loop_cluster *cl, rlk_lconn_down_fn down, void *arg)
{
    const rlock_client *c = cl->lc->c;
    rlk_lconn_cbs cbs = {.down = down,
                         .arg = arg,
                         .connect_timeout_ms = c->opts.connect_timeout_ms,
                         .command_timeout_ms = c->opts.command_timeout_ms,
                         .tls = c->tls};
    return cbs;
}

static lcl_node *lcl_node_at(rlk_loop_cluster *cl, const char *host, int port)
{
    for (lcl_node *n = cl->nodes; n != NULL; n = n->next) {
        if (n->port == port && strcmp(n->host, host) == 0) {
            return n;
        }
    }
    size_t hl = strlen(host);
    lcl_node *n = calloc(1, sizeof(*n) + hl + 1);
    if (n == NULL) {
        return NULL;
    }
    n->cl = cl;
    n->port = port;
    memcpy(n->host, host, hl + 1);
    n->next = cl->nodes;
    cl->nodes = n;
    return n;
}

/* ---- the map --------------------------------------------------------------------------- */

static void lcl_refresh(rlk_loop_cluster *cl);
static int lcl_send_known(rlk_loop_cluster *cl, int slot, const char *cmd, size_t len,
                          rlk_lconn_reply_fn fn, void *arg);

/* A queued script request formatted before the pub/sub mode was known: in sharded mode it runs
 * the script's sharded variant. */
static void lcl_req_mode(const rlk_loop_cluster *cl, lcl_req *q)
{
    int id = rlk_script_for(cl->lc->c, q->script);
    if (q->script >= 0 && id != q->script) {
        (void)rlk_loop_request_set_sha(q->cmd, q->len, rlk_script_get(id)->sha1);
    }
}

/* Fails (err < 0) or sends every queued request. A done run by a failure may free the client:
 * the state is then gone, and so is the rest of the queue (the free failed it). */
static void lcl_drain(rlk_loop_cluster *cl, int err)
{
    rlk_loop_client *lc = cl->lc;
    while (cl->queue != NULL) {
        lcl_req *q = cl->queue;
        cl->queue = q->next;
        if (cl->queue == NULL) {
            cl->tail = &cl->queue;
        }
        lcl_req_mode(cl, q);
        int r = err != RLOCK_OK ? err : lcl_send_known(cl, q->slot, q->cmd, q->len, q->fn, q->arg);
        rlk_loop_cb_enter(lc);
        if (r != RLOCK_OK && q->fn != NULL) {
            q->fn(q->arg, NULL, r);
        }
        free(q);
        if (rlk_loop_cb_leave(lc)) {
            return;
        }
    }
}

/* Installs a map read from a node asked at host; 0, or -1 when the reply is not a whole one. */
static int lcl_take_map(rlk_loop_cluster *cl, const redisReply *rep, const char *host)
{
    rlk_cluster_map m;
    if (rep->type != REDIS_REPLY_ARRAY || rlk_cluster_map_from_slots(rep, host, &m) != RLOCK_OK) {
        return -1;
    }
    if (m.n_nodes == 0 || rlk_cluster_map_covered(&m) == 0) {
        rlk_cluster_map_free(&m);
        return -1;
    }
    rlk_cluster_map_free(&cl->map);
    cl->map = m;
    return 0;
}

static void lcl_read_next(rlk_loop_cluster *cl);

static void lcl_note(rlk_loop_cluster *cl, const char *host, int port, const char *what)
{
    size_t n = strlen(cl->why);
    snprintf(cl->why + n, sizeof(cl->why) - n, "%s%s:%d: %s", n > 0 ? "; " : "", host, port, what);
}

/* The map and the pub/sub mode are known: the parked pub/sub connections are aimed, the queued
 * requests sent. */
static void lcl_known(rlk_loop_cluster *cl)
{
    rlk_lconn *probe = cl->probe;
    cl->probe = NULL;
    rlk_lconn_free(probe, RLOCK_ECLOSED); /* freed when this callback returns */
    cl->known = 1;
    cl->reading = 0;
    cl->backoff_ms = 0;
    rlk_loop_client *lc = cl->lc;
    rlk_loop_cb_enter(lc);
    cl->moved(lc, RLOCK_OK); /* the parked pub/sub connections go to their nodes */
    if (!rlk_loop_cb_leave(lc)) {
        lcl_drain(cl, RLOCK_OK);
    }
}

/* The pub/sub mode in auto, decided as a threaded client does (client.c): sharded when the
 * node answers PUBSUB SHARDNUMSUB 0 with an array (Redis >= 7.0), classic when it refuses. */
static void lcl_mode_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_cluster *cl = arg;
    if (err != RLOCK_OK) {
        return; /* the connection broke: lcl_probe_down asks the next seed */
    }
    rlock_client *c = cl->lc->c;
    c->sharded = rep->type == REDIS_REPLY_ARRAY;
    rlk_log(c, RLOCK_LOG_INFO, "cluster pub/sub: %s", c->sharded ? "sharded" : "classic");
    cl->mode_known = 1;
    lcl_known(cl);
}

/* The first read's answer from the seed asked: in auto mode the same node is then asked for
 * the pub/sub mode, before any request is sent. */
static void lcl_probe_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_cluster *cl = arg;
    if (err != RLOCK_OK) {
        return; /* the connection broke: lcl_probe_down asks the next seed */
    }
    const rlk_url_host *s = &cl->lc->c->url.hosts[cl->seed];
    if (lcl_take_map(cl, rep, s->host) != 0) {
        rlk_lconn *probe = cl->probe;
        cl->probe = NULL;
        rlk_lconn_free(probe, RLOCK_ECLOSED); /* freed when this callback returns */
        lcl_note(cl, s->host, s->port, rep->type == REDIS_REPLY_ERROR ? rep->str : "no slot map");
        cl->seed++;
        lcl_read_next(cl);
        return;
    }
    const char *argv[3] = {"PUBSUB", "SHARDNUMSUB", "0"};
    if (cl->mode_known) {
        lcl_known(cl);
    } else if (rlk_lconn_command(cl->probe, 3, argv, NULL, lcl_mode_reply, cl) != RLOCK_OK) {
        rlk_lconn *probe = cl->probe;
        cl->probe = NULL;
        rlk_lconn_free(probe, RLOCK_ECLOSED);
        lcl_note(cl, s->host, s->port, rlock_last_error());
        cl->seed++;
        lcl_read_next(cl);
    }
}

static void lcl_probe_down(void *arg, int err)
{
    rlk_loop_cluster *cl = arg;
    const rlk_url_host *s = &cl->lc->c->url.hosts[cl->seed];
    rlk_lconn_free(cl->probe, err);
    cl->probe = NULL;
    lcl_note(cl, s->host, s->port, rlock_last_error());
    cl->seed++;
    lcl_read_next(cl);
}

/* No seed gave a map: what was queued fails, and no read starts again for a back-off. */
static void lcl_read_failed(rlk_loop_cluster *cl)
{
    int64_t d = cl->backoff_ms;
    d = d < 50 ? 50 : d * 2 > 2000 ? 2000 : d * 2;
    cl->backoff_ms = d;
    cl->retry_at = rlk_now_ms() + d;
    cl->reading = 0;
    int err = rlk_err(RLOCK_ECONN, "no cluster seed gave a slot map: %s", cl->why);
    rlk_loop_client *lc = cl->lc;
    rlk_loop_cb_enter(lc);
    cl->moved(lc, err);
    if (!rlk_loop_cb_leave(lc)) {
        lcl_drain(cl, err);
    }
}

/* Asks the seeds from cl->seed on, one at a time. */
static void lcl_read_next(rlk_loop_cluster *cl)
{
    const rlk_url *url = &cl->lc->c->url;
    for (; cl->seed < url->nhosts; cl->seed++) {
        const rlk_url_host *s = &url->hosts[cl->seed];
        rlk_url u = lcl_url(cl, s->host, s->port);
        rlk_lconn_cbs cbs = lcl_cbs(cl, lcl_probe_down, cl);
        const char *argv[2] = {"CLUSTER", "SLOTS"};
        int r = rlk_lconn_new(&cl->lc->loop, &u, &cbs, &cl->probe);
        r = r ? r : rlk_lconn_command(cl->probe, 2, argv, NULL, lcl_probe_reply, cl);
        if (r == RLOCK_OK) {
            return;
        }
        lcl_note(cl, s->host, s->port, rlock_last_error());
        if (cl->probe != NULL) {
            rlk_lconn_free(cl->probe, r);
            cl->probe = NULL;
        }
    }
    lcl_read_failed(cl);
}

/* Starts the first read (again); RLOCK_OK, or RLOCK_ECONN during a failed read's back-off. */
static int lcl_read_start(rlk_loop_cluster *cl)
{
    int64_t left = cl->retry_at - rlk_now_ms();
    if (left > 0) {
        return rlk_err(RLOCK_ECONN, "no cluster seed gave a slot map; the next read is in %lld ms",
                       (long long)left);
    }
    cl->reading = 1;
    cl->seed = 0;
    cl->why[0] = '\0';
    lcl_read_next(cl);
    return RLOCK_OK;
}

static void lcl_refresh_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_cluster *cl = arg;
    cl->reading = 0;
    if (err == RLOCK_OK && lcl_take_map(cl, rep, cl->map.nodes[0].host) == 0) {
        cl->lc->up->shards_check(cl->lc); /* a failed one keeps the old map */
    }
}

/* Reads the map again from the home node, unless a read is in flight or began less than the
 * gap ago. */
static void lcl_refresh(rlk_loop_cluster *cl)
{
    int64_t now = rlk_now_ms();
    if (!cl->known || cl->reading || now - cl->read_at < RLK_CLUSTER_FAILURE_REFRESH_GAP_MS) {
        return;
    }
    static const char req[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
    cl->read_at = now;
    if (lcl_send_known(cl, -1, req, sizeof(req) - 1, lcl_refresh_reply, cl) == RLOCK_OK) {
        cl->reading = 1;
    }
}

/* ---- node connections ------------------------------------------------------------------ */

/* A node's connection broke: dialled again at its next request, after a back-off when it never
 * answered; the map may have changed (a failover), so it is read again. */
static void lcl_node_down(void *arg, int err)
{
    lcl_node *n = arg;
    int64_t d = n->backoff_ms;
    d = rlk_lconn_replied(n->conn) ? 0 : d < 50 ? 50 : d * 2 > 2000 ? 2000 : d * 2;
    n->backoff_ms = d;
    n->retry_at = rlk_now_ms() + d;
    rlk_lconn_free(n->conn, err);
    n->conn = NULL;
    lcl_refresh(n->cl);
}

static int lcl_node_conn(lcl_node *n, rlk_lconn **out)
{
    rlk_loop_cluster *cl = n->cl;
    if (n->conn == NULL) {
        int64_t left = n->retry_at - rlk_now_ms();
        if (left > 0) {
            return rlk_err(RLOCK_ECONN,
                           "cluster node %s:%d did not answer; the next dial is in %lld ms",
                           n->host, n->port, (long long)left);
        }
        rlk_url u = lcl_url(cl, n->host, n->port);
        rlk_lconn_cbs cbs = lcl_cbs(cl, lcl_node_down, n);
        int r = rlk_lconn_new(&cl->lc->loop, &u, &cbs, &n->conn);
        if (r != RLOCK_OK) {
            n->retry_at = rlk_now_ms() + 50;
            return r;
        }
    }
    *out = n->conn;
    return RLOCK_OK;
}

/* The node that serves slot (the home node for -1 or an unserved slot). */
static lcl_node *lcl_owner(rlk_loop_cluster *cl, int slot)
{
    int i = slot >= 0 && slot < RLK_CLUSTER_SLOTS ? cl->map.owner[slot] : -1;
    const rlk_cluster_node *m = &cl->map.nodes[i >= 0 ? i : 0];
    return lcl_node_at(cl, m->host, m->port);
}

static int lcl_queue(rlk_loop_cluster *cl, int slot, int script, const char *cmd, size_t len,
                     rlk_lconn_reply_fn fn, void *arg)
{
    int r = cl->reading ? RLOCK_OK : lcl_read_start(cl);
    lcl_req *q = r == RLOCK_OK ? malloc(sizeof(*q) + len) : NULL;
    if (q == NULL && r == RLOCK_OK) {
        (void)rlk_err(RLOCK_ENOMEM, "out of memory queueing a cluster request");
        return RLOCK_ENOMEM;
    }
    if (q == NULL) {
        return r;
    }
    *q = (lcl_req){.slot = slot, .script = script, .fn = fn, .arg = arg, .len = len};
    memcpy(q->cmd, cmd, len);
    *cl->tail = q;
    cl->tail = &q->next;
    return RLOCK_OK;
}

/* Sends to the master of slot in the map known. */
static int lcl_send_known(rlk_loop_cluster *cl, int slot, const char *cmd, size_t len,
                          rlk_lconn_reply_fn fn, void *arg)
{
    lcl_node *n = lcl_owner(cl, slot);
    rlk_lconn *conn = NULL;
    if (n == NULL) {
        (void)rlk_err(RLOCK_ENOMEM, "out of memory sending a cluster request");
        return RLOCK_ENOMEM;
    }
    int r = lcl_node_conn(n, &conn);
    return r != RLOCK_OK || conn == NULL ? (r ? r : RLOCK_ECONN)
                                         : rlk_lconn_send(conn, cmd, len, fn, arg);
}

int rlk_loop_cluster_send(rlk_loop_cluster *cl, int slot, const char *cmd, size_t len,
                          rlk_lconn_reply_fn fn, void *arg)
{
    return cl->known ? lcl_send_known(cl, slot, cmd, len, fn, arg)
                     : lcl_queue(cl, slot, -1, cmd, len, fn, arg);
}

int rlk_loop_cluster_send_script(rlk_loop_cluster *cl, int slot, int script, const char *cmd,
                                 size_t len, rlk_lconn_reply_fn fn, void *arg)
{
    return cl->known ? lcl_send_known(cl, slot, cmd, len, fn, arg)
                     : lcl_queue(cl, slot, script, cmd, len, fn, arg);
}

/* A command in flight, kept for its resends after a MOVED or ASK. */
typedef struct lcl_cmd {
    rlk_loop_cluster *cl;
    int slot;
    int redirects;
    rlk_lconn_reply_fn fn;
    void *arg;
    size_t len;
    char cmd[];
} lcl_cmd;

static void lcl_cmd_reply(void *arg, redisReply *rep, int err)
{
    lcl_cmd *w = arg;
    rlk_loop_cluster *cl = w->cl;
    int r = 0;
    if (err == RLOCK_OK && w->redirects < 5) {
        w->redirects++;
        r = rlk_loop_cluster_redirect(cl, rep, w->slot, -1, w->cmd, w->len, lcl_cmd_reply, w);
    }
    if (r == 1) {
        return;
    }
    w->fn(w->arg, r < 0 ? NULL : rep, r < 0 ? r : err);
    free(w);
}

int rlk_loop_cluster_command(rlk_loop_cluster *cl, int slot, int argc, const char **argv,
                             const size_t *lens, rlk_lconn_reply_fn fn, void *arg)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        return rlk_err(RLOCK_ENOMEM, "out of memory formatting a cluster request");
    }
    lcl_cmd *w = fn != NULL ? malloc(sizeof(*w) + (size_t)len) : NULL;
    if (w != NULL) {
        *w = (lcl_cmd){.cl = cl, .slot = slot, .fn = fn, .arg = arg, .len = (size_t)len};
        memcpy(w->cmd, cmd, (size_t)len);
    }
    if (fn != NULL && w == NULL) {
        redisFreeCommand(cmd);
        (void)rlk_err(RLOCK_ENOMEM, "out of memory sending a cluster request");
        return RLOCK_ENOMEM;
    }
    int r = rlk_loop_cluster_send(cl, slot, cmd, (size_t)len, w != NULL ? lcl_cmd_reply : NULL, w);
    if (r != RLOCK_OK) {
        free(w);
    }
    redisFreeCommand(cmd);
    return r;
}

/* A MOVED: the slot's new owner is recorded now (the read that follows may come from a node
 * that has not heard of the move yet, and a later MOVED corrects it again). */
static void lcl_moved(rlk_loop_cluster *cl, const rlk_redirect *rd)
{
    if (rlk_cluster_map_add_node(&cl->map, rd->host, rd->port) != RLOCK_OK) {
        return;
    }
    for (int i = 0; i < cl->map.n_nodes; i++) {
        if (cl->map.nodes[i].port == rd->port && strcmp(cl->map.nodes[i].host, rd->host) == 0) {
            cl->map.owner[rd->slot] = (int16_t)i;
        }
    }
    cl->read_at = 0; /* news about the map: read it now */
    lcl_refresh(cl);
    cl->lc->up->shards_check(cl->lc); /* the slot's shard channels follow it */
}

void rlk_loop_cluster_refresh(rlk_loop_cluster *cl)
{
    if (cl != NULL) {
        cl->read_at = 0;
        lcl_refresh(cl);
    }
}

int rlk_loop_cluster_redirected(rlk_loop_cluster *cl, const redisReply *rep)
{
    rlk_redirect rd;
    rlk_redirect_kind k = rep->type == REDIS_REPLY_ERROR
                              ? rlk_cluster_parse_redirect(rep->str, rep->len, &rd)
                              : RLK_REDIRECT_NONE;
    if (cl == NULL || k == RLK_REDIRECT_NONE || !cl->known || rd.slot < 0 ||
        rd.slot >= RLK_CLUSTER_SLOTS) {
        return -1;
    }
    if (k == RLK_REDIRECT_MOVED && rd.host[0] != '\0') {
        lcl_moved(cl, &rd);
    } else {
        rlk_loop_cluster_refresh(cl); /* an ASK: the slot is moving; the map says when it moved */
    }
    return rd.slot;
}

int rlk_loop_cluster_owner(rlk_loop_cluster *cl, int slot, char *host, int *port)
{
    if (!cl->known) {
        return RLOCK_ECONN;
    }
    int i = slot >= 0 && slot < RLK_CLUSTER_SLOTS ? cl->map.owner[slot] : -1;
    const rlk_cluster_node *m = &cl->map.nodes[i >= 0 ? i : 0];
    snprintf(host, RLK_HOST_MAX, "%s", m->host);
    *port = m->port;
    return RLOCK_OK;
}

int rlk_loop_cluster_redirect(rlk_loop_cluster *cl, const redisReply *rep, int slot, int script,
                              const char *cmd, size_t len, rlk_lconn_reply_fn fn, void *arg)
{
    rlk_redirect rd;
    rlk_redirect_kind k = rep->type == REDIS_REPLY_ERROR
                              ? rlk_cluster_parse_redirect(rep->str, rep->len, &rd)
                              : RLK_REDIRECT_NONE;
    if (k == RLK_REDIRECT_NONE || !cl->known) {
        return 0;
    }
    if (rd.host[0] == '\0' || rd.slot < 0 || rd.slot >= RLK_CLUSTER_SLOTS) {
        return rlk_err(RLOCK_EPROTO, "cluster: a redirection names no node: %.*s", (int)rep->len,
                       rep->str);
    }
    if (k == RLK_REDIRECT_MOVED) {
        lcl_moved(cl, &rd);
        int r = lcl_send_known(cl, slot, cmd, len, fn, arg);
        return r ? r : 1;
    }
    lcl_node *n = lcl_node_at(cl, rd.host, rd.port);
    rlk_lconn *conn = NULL;
    const char *asking[1] = {"ASKING"};
    const rlk_script_src *s = script >= 0 ? rlk_script_get(script) : NULL;
    const char *load[3] = {"SCRIPT", "LOAD", s != NULL ? (const char *)s->body : ""};
    size_t load_lens[3] = {6, 4, s != NULL ? s->len : 0};
    int r = n != NULL ? lcl_node_conn(n, &conn) : rlk_err(RLOCK_ENOMEM, "out of memory");
    r = r || s == NULL ? r : rlk_lconn_command(conn, 3, load, load_lens, lcl_ignore, NULL);
    r = r ? r : rlk_lconn_command(conn, 1, asking, NULL, lcl_ignore, NULL);
    r = r ? r : rlk_lconn_send(conn, cmd, len, fn, arg);
    return r ? r : 1;
}

int rlk_loop_cluster_home(const rlk_loop_cluster *cl, char *host, int *port)
{
    if (!cl->known) {
        return RLOCK_ECONN;
    }
    snprintf(host, RLK_HOST_MAX, "%s", cl->map.nodes[0].host);
    *port = cl->map.nodes[0].port;
    return RLOCK_OK;
}

rlk_replicas *rlk_loop_cluster_replicas(rlk_loop_cluster *cl, int slot)
{
    lcl_node *n = cl != NULL && cl->known ? lcl_owner(cl, slot) : NULL;
    return n != NULL ? &n->replicas : NULL;
}

rlk_lconn *rlk_loop_cluster_conn(rlk_loop_cluster *cl, int slot)
{
    lcl_node *n = cl != NULL && cl->known ? lcl_owner(cl, slot) : NULL;
    return n != NULL ? n->conn : NULL;
}

int rlk_loop_cluster_ok(const rlk_loop_cluster *cl)
{
    for (const lcl_node *n = cl != NULL ? cl->nodes : NULL; n != NULL; n = n->next) {
        if (rlk_lconn_ok(n->conn)) {
            return 1;
        }
    }
    return 0;
}

void rlk_loop_cluster_flush(rlk_loop_cluster *cl)
{
    for (lcl_node *n = cl != NULL ? cl->nodes : NULL; n != NULL; n = n->next) {
        if (n->conn != NULL) {
            rlk_lconn_flush(n->conn);
        }
    }
}

int rlk_loop_cluster_new(rlk_loop_client *lc, rlk_loop_moved_fn moved, rlk_loop_cluster **out)
{
    rlk_loop_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory making a cluster client");
    }
    cl->lc = lc;
    cl->moved = moved;
    cl->tail = &cl->queue;
    /* Forced by the option, or probed on the loop with the first map (lcl_mode_reply). */
    lc->c->sharded = lc->c->opts.cluster_pubsub == RLOCK_CLUSTER_PUBSUB_SHARDED;
    cl->mode_known = lc->c->opts.cluster_pubsub != RLOCK_CLUSTER_PUBSUB_AUTO;
    *out = cl;
    (void)lcl_read_start(cl);
    if (!cl->reading && !cl->known) { /* every seed refused at once */
        return rlk_err(RLOCK_ECONN, "no cluster seed could be reached: %s", cl->why);
    }
    return RLOCK_OK;
}

void rlk_loop_cluster_free(rlk_loop_cluster *cl, int err)
{
    if (cl == NULL) {
        return;
    }
    rlk_lconn_free(cl->probe, err);
    for (lcl_node *n = cl->nodes; n != NULL; n = n->next) {
        rlk_lconn_free(n->conn, err);
        n->conn = NULL;
    }
    while (cl->queue != NULL) {
        lcl_req *q = cl->queue;
        cl->queue = q->next;
        if (q->fn != NULL) {
            q->fn(q->arg, NULL, err);
        }
        free(q);
    }
    while (cl->nodes != NULL) {
        lcl_node *n = cl->nodes;
        cl->nodes = n->next;
        free(n);
    }
    rlk_cluster_map_free(&cl->map);
    free(cl);
}
