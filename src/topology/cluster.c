/*
 * A cluster client's topology: the slot map read from the cluster, the pools of its masters,
 * and the refresh that follows a MOVED (at most one in flight). See cluster.h.
 */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "conn_open.h"
#include "error.h"
#include "replica.h"

/* A master's pool, kept for the client's lifetime: a node that leaves the map keeps its pool
 * (its idle connections are dropped), and gets it back if it returns. */
typedef struct cluster_pool {
    char *host;
    int port;
    rlk_pool *pool;
} cluster_pool;

struct rlk_cluster {
    rlock_client *c;
    pthread_mutex_t mu; /* guards everything below; never held across I/O or another lock */
    pthread_cond_t cv;  /* a refresh finished */
    rlk_cluster_map map;
    int *node_pool; /* map.nodes[i]'s index in pools, -1 before its first use */
    cluster_pool *pools;
    int n_pools, cap_pools;
    int refreshing;
    int64_t refreshed_at; /* when the last refresh ended (rlk_now_ms), successful or not */
    uint64_t epoch;       /* raised by every map change */
    /* The pool that last served each slot (an index into pools, -1: none yet): whose replica
     * count a master that takes the slot over starts from, even when the slot was unserved in
     * between (a map read while its dead master was not replaced yet). */
    int16_t last_pool[RLK_CLUSTER_SLOTS];
    rlk_cluster_stats stats;
    /* The masters of the last map read (not MOVED's corrections of it): a map read later with a
     * master not among them is a failover (rlock_failovers_total). NULL before the first. */
    rlk_cluster_node *masters;
    int n_masters;
};

/* The time left before deadline_ms, at least 1 ms. */
static int64_t cluster_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - rlk_now_ms();
    return left < 1 ? 1 : left;
}

/* Decodes the topology reply of the command that was asked (shards or slots) over a TLS
 * connection or not. */
static int cluster_decode(const redisReply *r, int shards, const char *host, int tls,
                          rlk_cluster_map *out)
{
    return shards ? rlk_cluster_map_from_shards_tls(r, host, tls, out)
                  : rlk_cluster_map_from_slots(r, host, out);
}

/* Asks one node for the map: CLUSTER SHARDS, or CLUSTER SLOTS when it does not know SHARDS. */
static int cluster_ask(rlock_client *c, const char *host, int port, int64_t deadline_ms,
                       rlk_cluster_map *out)
{
    rlk_endpoint ep;
    char buf[RLK_HOST_MAX];
    rlk_client_endpoint(c, &ep, buf);
    ep.host = host;
    ep.port = port;
    rlk_conn *conn = NULL;
    int r = rlk_conn_open_at(c, &ep, deadline_ms, cluster_left(deadline_ms), &conn);
    redisReply *rep = NULL;
    for (int shards = 1; r == RLOCK_OK && shards >= 0; shards--) {
        const char *argv[2] = {"CLUSTER", shards ? "SHARDS" : "SLOTS"};
        r = rlk_conn_command(conn, 2, argv, NULL, &rep);
        if (r == RLOCK_OK && rep->type != REDIS_REPLY_ERROR) {
            r = cluster_decode(rep, shards, host, ep.tls, out);
            break;
        }
        if (r == RLOCK_OK && shards == 0) {
            r = rlk_err(RLOCK_EREDIS, "CLUSTER SLOTS refused: %s", rep->str);
        }
        freeReplyObject(rep);
        rep = NULL;
    }
    freeReplyObject(rep);
    rlk_conn_close(conn);
    if (r == RLOCK_OK && rlk_cluster_map_covered(out) == 0) {
        rlk_cluster_map_free(out);
        r = rlk_err(RLOCK_ECONN, "%s:%d serves no slot (not a cluster node yet?)", host, port);
    }
    return r;
}

/* Asks the known masters, then the URL's seeds, until one answers. The last failure's message
 * is kept in the last error. */
static int cluster_fetch(rlk_cluster *cl, const rlk_cluster_map *known, int64_t deadline_ms,
                         rlk_cluster_map *out)
{
    rlock_client *c = cl->c;
    int r = rlk_err(RLOCK_ECONN, "the cluster URL names no seed");
    int auth = 0;
    for (int i = 0; known != NULL && i < known->n_nodes && r != RLOCK_OK; i++) {
        r = cluster_ask(c, known->nodes[i].host, known->nodes[i].port, deadline_ms, out);
        auth |= r == RLOCK_EAUTH;
    }
    for (size_t i = 0; i < c->url.nhosts && r != RLOCK_OK; i++) {
        r = cluster_ask(c, c->url.hosts[i].host, c->url.hosts[i].port, deadline_ms, out);
        auth |= r == RLOCK_EAUTH;
    }
    if (r != RLOCK_OK && r != RLOCK_ENOMEM) {
        /* A refused password is what the user must fix, whatever else failed after it. The
         * last failure is copied first: rlk_err() writes the buffer it would read. */
        char last[256];
        snprintf(last, sizeof(last), "%s", rlock_last_error());
        r = rlk_err(auth ? RLOCK_EAUTH : RLOCK_ECONN, "no cluster node answered (last: %s)", last);
    }
    return r;
}

/* The index of host:port among the pools, or -1. Mutex held. */
static int cluster_find_pool(const rlk_cluster *cl, const char *host, int port)
{
    for (int i = 0; i < cl->n_pools; i++) {
        if (cl->pools[i].port == port && strcmp(cl->pools[i].host, host) == 0) {
            return i;
        }
    }
    return -1;
}

/* The index of host:port among the pools, made when new; -1 without memory. Mutex held. */
static int cluster_get_pool(rlk_cluster *cl, const char *host, int port)
{
    int i = cluster_find_pool(cl, host, port);
    if (i >= 0) {
        return i;
    }
    if (cl->n_pools == cl->cap_pools) {
        int cap = cl->cap_pools ? cl->cap_pools * 2 : 8;
        cluster_pool *grown = realloc(cl->pools, sizeof(*grown) * (size_t)cap);
        if (grown == NULL) {
            return rlk_err(RLOCK_ENOMEM, "cannot grow the cluster's pools"), -1;
        }
        cl->pools = grown;
        cl->cap_pools = cap;
    }
    cluster_pool *p = &cl->pools[cl->n_pools];
    p->host = strdup(host);
    p->port = port;
    if (p->host == NULL || rlk_pool_new_at(cl->c, host, port, &p->pool) != RLOCK_OK) {
        free(p->host);
        return rlk_err(RLOCK_ENOMEM, "cannot make a pool for %s:%d", host, port), -1;
    }
    return cl->n_pools++;
}

/* A node that is no longer a master in the map m forgets its replica count: when it serves
 * slots again (a failover back), its replicas are not those it had then. Mutex held. */
static void cluster_forget_replicas(rlk_cluster *cl, const rlk_cluster_map *m)
{
    for (int p = 0; p < cl->n_pools; p++) {
        int master = 0;
        for (int i = 0; i < m->n_nodes && !master; i++) {
            master = m->nodes[i].port == cl->pools[p].port &&
                     strcmp(m->nodes[i].host, cl->pools[p].host) == 0;
        }
        if (!master) {
            rlk_replica_forget(rlk_pool_replicas(cl->pools[p].pool));
        }
    }
}

/* A master that took over slots from another one (a failover inside the cluster) starts from
 * the replica count its predecessor had, as a Sentinel client keeps the old master's: fewer
 * replicas on the new master then count only after RLK_REPLICA_SHRINK_MS, and a grant meanwhile
 * fails closed instead of passing unsynced while the old master has not yet rejoined as its
 * replica. Its pool is made now for that (no I/O). Mutex held; m is the new map. */
static void cluster_inherit_replicas(rlk_cluster *cl, const rlk_cluster_map *m)
{
    if (m->n_nodes <= 0) {
        return; /* no master to take anything over */
    }
    for (int slot = 0; slot < RLK_CLUSTER_SLOTS; slot++) {
        int before = cl->last_pool[slot];
        int now = before >= 0 ? m->owner[slot] : -1;
        if (now < 0) {
            continue;
        }
        const rlk_cluster_node *b = &m->nodes[now];
        if (cl->pools[before].port == b->port && strcmp(cl->pools[before].host, b->host) == 0) {
            continue;
        }
        /* By index: making the pool may move cl->pools. */
        int p = cluster_get_pool(cl, b->host, b->port);
        if (p >= 0) {
            rlk_replica_inherit(rlk_pool_replicas(cl->pools[p].pool),
                                rlk_pool_replicas(cl->pools[before].pool));
        }
    }
}

static void cluster_masters_free(rlk_cluster_node *nodes, int n)
{
    for (int i = 0; i < n; i++) {
        free(nodes[i].host);
    }
    free(nodes);
}

/* Remembers m's masters (mutex held). Returns 1 when one of them was not a master of the map
 * read before (none for the first map), copied to host (RLK_HOST_MAX) and *port, else 0. */
static int cluster_note_masters(rlk_cluster *cl, const rlk_cluster_map *m, char *host, int *port)
{
    int fresh = 0;
    for (int i = 0; i < m->n_nodes && cl->masters != NULL && !fresh; i++) {
        int known = 0;
        for (int j = 0; j < cl->n_masters && !known; j++) {
            known = cl->masters[j].port == m->nodes[i].port &&
                    strcmp(cl->masters[j].host, m->nodes[i].host) == 0;
        }
        if (!known) {
            snprintf(host, RLK_HOST_MAX, "%s", m->nodes[i].host);
            *port = m->nodes[i].port;
            fresh = 1;
        }
    }
    rlk_cluster_node *copy = calloc((size_t)(m->n_nodes > 0 ? m->n_nodes : 1), sizeof(*copy));
    for (int i = 0; copy != NULL && i < m->n_nodes; i++) {
        copy[i].port = m->nodes[i].port;
        copy[i].host = strdup(m->nodes[i].host);
        if (copy[i].host == NULL) {
            cluster_masters_free(copy, i);
            copy = NULL; /* out of memory: the list read before stays */
        }
    }
    if (copy != NULL) {
        cluster_masters_free(cl->masters, cl->n_masters);
        cl->masters = copy;
        cl->n_masters = m->n_nodes;
    }
    return fresh;
}

/* Puts a new map in place (mutex held): the pool of each node is looked up on first use. */
static int cluster_install(rlk_cluster *cl, rlk_cluster_map *m)
{
    int *np = malloc(sizeof(int) * (size_t)(m->n_nodes > 0 ? m->n_nodes : 1));
    if (np == NULL) {
        rlk_cluster_map_free(m);
        return rlk_err(RLOCK_ENOMEM, "cannot install the cluster map");
    }
    for (int i = 0; i < m->n_nodes; i++) {
        np[i] = cluster_find_pool(cl, m->nodes[i].host, m->nodes[i].port);
    }
    /* Inherited first: the old master's count is forgotten once it left the masters. */
    cluster_inherit_replicas(cl, m);
    cluster_forget_replicas(cl, m);
    rlk_cluster_map_free(&cl->map);
    free(cl->node_pool);
    cl->map = *m;
    cl->node_pool = np;
    cl->epoch++;
    return RLOCK_OK;
}

/* Keeps the home node while it is a master of the map, else moves home to the first master:
 * the home pool and the subscriber then reconnect there. */
static void cluster_pick_home(rlk_cluster *cl)
{
    rlock_client *c = cl->c;
    rlk_endpoint ep;
    char host[RLK_HOST_MAX];
    rlk_client_endpoint(c, &ep, host);
    pthread_mutex_lock(&cl->mu);
    int keep = 0;
    for (int i = 0; i < cl->map.n_nodes && !keep; i++) {
        keep = cl->map.nodes[i].port == ep.port && strcmp(cl->map.nodes[i].host, host) == 0;
    }
    char first[RLK_HOST_MAX] = "";
    int port = 0;
    if (!keep && cl->map.n_nodes > 0) {
        snprintf(first, sizeof(first), "%s", cl->map.nodes[0].host);
        port = cl->map.nodes[0].port;
    }
    pthread_mutex_unlock(&cl->mu);
    if (port != 0) {
        rlk_client_set_master(c, first, port);
        if (c->pool != NULL) {
            rlk_pool_reset(c->pool);
        }
    }
}

int rlk_cluster_new(rlock_client *c, int64_t deadline_ms)
{
    rlk_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the cluster state");
    }
    cl->c = c;
    memset(cl->last_pool, 0xff, sizeof(cl->last_pool)); /* -1 everywhere */
    pthread_mutex_init(&cl->mu, NULL);
    rlk_cond_init_monotonic(&cl->cv);
    rlk_cluster_map m;
    m.nodes = NULL;
    m.n_nodes = 0;
    int r = cluster_fetch(cl, NULL, deadline_ms, &m);
    if (r == RLOCK_OK) {
        char host[RLK_HOST_MAX];
        int port = 0;
        pthread_mutex_lock(&cl->mu);
        (void)cluster_note_masters(cl, &m, host, &port); /* the first map: no failover */
        r = cluster_install(cl, &m);
        pthread_mutex_unlock(&cl->mu);
    }
    if (r != RLOCK_OK) {
        rlk_cluster_free(cl);
        return r;
    }
    cluster_pick_home(cl);
    c->cluster = cl;
    return RLOCK_OK;
}

void rlk_cluster_free(rlk_cluster *cl)
{
    if (cl == NULL) {
        return;
    }
    for (int i = 0; i < cl->n_pools; i++) {
        rlk_pool_free(cl->pools[i].pool);
        free(cl->pools[i].host);
    }
    free(cl->pools);
    free(cl->node_pool);
    rlk_cluster_map_free(&cl->map);
    cluster_masters_free(cl->masters, cl->n_masters);
    pthread_cond_destroy(&cl->cv);
    pthread_mutex_destroy(&cl->mu);
    free(cl);
}

void rlk_cluster_fork_lock(rlk_cluster *cl)
{
    pthread_mutex_lock(&cl->mu);
    for (int i = 0; i < cl->n_pools; i++) {
        rlk_pool_fork_lock(cl->pools[i].pool);
    }
}

void rlk_cluster_fork_unlock(rlk_cluster *cl)
{
    for (int i = 0; i < cl->n_pools; i++) {
        rlk_pool_fork_unlock(cl->pools[i].pool);
    }
    pthread_mutex_unlock(&cl->mu);
}

void rlk_cluster_abandon_pools(rlk_cluster *cl)
{
    if (cl == NULL) {
        return;
    }
    /* The child is single-threaded here: no lock is needed, and none may be waited for. */
    for (int i = 0; i < cl->n_pools; i++) {
        rlk_pool_abandon(cl->pools[i].pool);
        free(cl->pools[i].host);
    }
    cl->n_pools = 0;
    for (int i = 0; i < cl->map.n_nodes; i++) {
        cl->node_pool[i] = -1;
    }
    memset(cl->last_pool, 0xff, sizeof(cl->last_pool));
    cl->refreshing = 0;
}

rlk_pool *rlk_cluster_pool(rlk_cluster *cl, int slot, uint64_t *epoch)
{
    rlk_pool *p = NULL;
    pthread_mutex_lock(&cl->mu);
    *epoch = cl->epoch;
    int node = slot >= 0 && slot < RLK_CLUSTER_SLOTS ? cl->map.owner[slot] : -1;
    if (node >= 0) {
        if (cl->node_pool[node] < 0) {
            const rlk_cluster_node *n = &cl->map.nodes[node];
            cl->node_pool[node] = cluster_get_pool(cl, n->host, n->port);
        }
        p = cl->node_pool[node] >= 0 ? cl->pools[cl->node_pool[node]].pool : NULL;
        cl->last_pool[slot] = (int16_t)cl->node_pool[node];
    }
    pthread_mutex_unlock(&cl->mu);
    return node >= 0 ? p : cl->c->pool;
}

rlk_pool *rlk_cluster_pool_at(rlk_cluster *cl, const char *host, int port)
{
    pthread_mutex_lock(&cl->mu);
    int i = cluster_get_pool(cl, host, port);
    rlk_pool *p = i >= 0 ? cl->pools[i].pool : NULL;
    pthread_mutex_unlock(&cl->mu);
    return p;
}

int rlk_cluster_owner(rlk_cluster *cl, int slot, char *host, int *port)
{
    pthread_mutex_lock(&cl->mu);
    int node = slot >= 0 && slot < RLK_CLUSTER_SLOTS ? cl->map.owner[slot] : -1;
    if (node >= 0) {
        snprintf(host, RLK_HOST_MAX, "%s", cl->map.nodes[node].host);
        *port = cl->map.nodes[node].port;
    }
    pthread_mutex_unlock(&cl->mu);
    return node >= 0 ? RLOCK_OK : RLOCK_ECONN;
}

int rlk_cluster_node_of(rlk_cluster *cl, int slot)
{
    pthread_mutex_lock(&cl->mu);
    int node = cl->map.owner[slot];
    pthread_mutex_unlock(&cl->mu);
    return node;
}

int rlk_cluster_refresh(rlk_cluster *cl, uint64_t epoch)
{
    pthread_mutex_lock(&cl->mu);
    while (cl->refreshing && cl->epoch == epoch) {
        pthread_cond_wait(&cl->cv, &cl->mu);
    }
    if (cl->epoch != epoch) {
        pthread_mutex_unlock(&cl->mu);
        return RLOCK_OK; /* someone read the map since the caller looked */
    }
    cl->refreshing = 1;
    rlk_cluster_map known;
    known.n_nodes = 0;
    known.nodes = NULL;
    /* The hosts are copied: the map may not be read without the mutex. */
    int r = RLOCK_OK;
    for (int i = 0; i < cl->map.n_nodes && r == RLOCK_OK; i++) {
        r = rlk_cluster_map_add_node(&known, cl->map.nodes[i].host, cl->map.nodes[i].port);
    }
    pthread_mutex_unlock(&cl->mu);
    rlk_cluster_map m;
    m.nodes = NULL;
    m.n_nodes = 0;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), cl->c->opts.command_timeout_ms);
    r = r ? r : cluster_fetch(cl, &known, deadline, &m);
    rlk_cluster_map_free(&known);
    char fresh_host[RLK_HOST_MAX];
    int fresh_port = 0;
    pthread_mutex_lock(&cl->mu);
    int fresh = r == RLOCK_OK && cluster_note_masters(cl, &m, fresh_host, &fresh_port);
    r = r ? r : cluster_install(cl, &m);
    cl->stats.refreshes += r == RLOCK_OK;
    cl->refreshing = 0;
    cl->refreshed_at = rlk_now_ms();
    if (r != RLOCK_OK) {
        cl->epoch++; /* waiters must not start a refresh of their own right after this one */
    }
    pthread_cond_broadcast(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
    if (r == RLOCK_OK) {
        cluster_pick_home(cl);
    }
    if (fresh && r == RLOCK_OK) {
        rlk_obs_failover(cl->c, fresh_host, fresh_port);
    }
    return r;
}

int rlk_cluster_refresh_after_failure(rlk_cluster *cl, uint64_t epoch)
{
    pthread_mutex_lock(&cl->mu);
    int recent = !cl->refreshing && cl->refreshed_at != 0 &&
                 rlk_now_ms() - cl->refreshed_at < RLK_CLUSTER_FAILURE_REFRESH_GAP_MS;
    pthread_mutex_unlock(&cl->mu);
    return recent ? RLOCK_OK : rlk_cluster_refresh(cl, epoch);
}

void rlk_cluster_note_moved(rlk_cluster *cl, int slot, const char *host, int port)
{
    pthread_mutex_lock(&cl->mu);
    int node = -1;
    for (int i = 0; i < cl->map.n_nodes && node < 0; i++) {
        node = cl->map.nodes[i].port == port && strcmp(cl->map.nodes[i].host, host) == 0 ? i : -1;
    }
    if (node < 0) {
        int *np = realloc(cl->node_pool, sizeof(int) * (size_t)(cl->map.n_nodes + 1));
        if (np != NULL) {
            cl->node_pool = np;
            node = rlk_cluster_map_add_node(&cl->map, host, port) == RLOCK_OK ? cl->map.n_nodes - 1
                                                                              : -1;
            if (node >= 0) {
                np[node] = -1;
            }
        }
    }
    if (node >= 0 && cl->map.owner[slot] != node) {
        cl->map.owner[slot] = (int16_t)node;
        cl->epoch++;
    }
    pthread_mutex_unlock(&cl->mu);
}

void rlk_cluster_get_stats(rlk_cluster *cl, rlk_cluster_stats *out)
{
    pthread_mutex_lock(&cl->mu);
    *out = cl->stats;
    pthread_mutex_unlock(&cl->mu);
}

void rlk_cluster_count(rlk_cluster *cl, int kind)
{
    pthread_mutex_lock(&cl->mu);
    cl->stats.moved += kind == 1;
    cl->stats.ask += kind == 2;
    cl->stats.tryagain += kind == 3;
    pthread_mutex_unlock(&cl->mu);
}
