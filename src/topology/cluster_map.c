/*
 * The slot map of a Redis Cluster: decoding CLUSTER SHARDS, CLUSTER SLOTS and redirections.
 * See cluster_map.h.
 */
#include "cluster_map.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

static void map_init(rlk_cluster_map *m)
{
    m->nodes = NULL;
    m->n_nodes = 0;
    for (int s = 0; s < RLK_CLUSTER_SLOTS; s++) {
        m->owner[s] = -1;
    }
}

void rlk_cluster_map_free(rlk_cluster_map *m)
{
    if (m == NULL) {
        return;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        free(m->nodes[i].host);
    }
    free(m->nodes);
    map_init(m);
}

int rlk_cluster_map_covered(const rlk_cluster_map *m)
{
    int covered = 0;
    for (int s = 0; s < RLK_CLUSTER_SLOTS; s++) {
        covered += m->owner[s] >= 0;
    }
    return covered;
}

/* The index of host:port in m, added when new; -1 when out of memory. */
static int node_index(rlk_cluster_map *m, const char *host, size_t host_len, int port)
{
    for (int i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == host_len &&
            memcmp(m->nodes[i].host, host, host_len) == 0) {
            return i;
        }
    }
    rlk_cluster_node *grown = realloc(m->nodes, (size_t)(m->n_nodes + 1) * sizeof(*grown));
    if (grown == NULL) {
        return -1;
    }
    m->nodes = grown;
    char *copy = malloc(host_len + 1);
    if (copy == NULL) {
        return -1;
    }
    memcpy(copy, host, host_len);
    copy[host_len] = '\0';
    m->nodes[m->n_nodes] = (rlk_cluster_node){.host = copy, .port = port};
    return m->n_nodes++;
}

int rlk_cluster_map_add_node(rlk_cluster_map *m, const char *host, int port)
{
    return node_index(m, host, strlen(host), port) >= 0
               ? RLOCK_OK
               : rlk_err(RLOCK_ENOMEM, "out of memory adding a cluster node");
}

static int is_int(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

static int is_str(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* Assigns slots start..end to the node at host (or asked_host when the node named none). */
static int assign(rlk_cluster_map *m, const redisReply *start, const redisReply *end,
                  const redisReply *host, long long port, const char *asked_host)
{
    if (!is_int(start) || !is_int(end) || start->integer < 0 || end->integer < start->integer ||
        end->integer >= RLK_CLUSTER_SLOTS || port <= 0 || port > 65535) {
        return rlk_err(RLOCK_EPROTO, "cluster topology: bad slot range or port");
    }
    const char *h = is_str(host) ? host->str : "";
    size_t hlen = is_str(host) ? host->len : 0;
    if (hlen == 0 || (hlen == 1 && h[0] == '?')) {
        h = asked_host;
        hlen = strlen(asked_host);
    }
    int idx = node_index(m, h, hlen, (int)port);
    if (idx < 0) {
        return rlk_err(RLOCK_ENOMEM, "out of memory reading the cluster topology");
    }
    for (long long s = start->integer; s <= end->integer; s++) {
        m->owner[s] = (int16_t)idx;
    }
    return RLOCK_OK;
}

static int slots_row(rlk_cluster_map *m, const redisReply *row, const char *asked_host)
{
    if (row->type != REDIS_REPLY_ARRAY || row->elements < 3 ||
        row->element[2]->type != REDIS_REPLY_ARRAY || row->element[2]->elements < 2 ||
        !is_int(row->element[2]->element[1])) {
        return rlk_err(RLOCK_EPROTO, "CLUSTER SLOTS: unexpected row shape");
    }
    const redisReply *master = row->element[2];
    return assign(m, row->element[0], row->element[1], master->element[0],
                  master->element[1]->integer, asked_host);
}

int rlk_cluster_map_from_slots(const redisReply *r, const char *asked_host, rlk_cluster_map *out)
{
    map_init(out);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return rlk_err(RLOCK_EPROTO, "CLUSTER SLOTS: expected an array reply");
    }
    for (size_t i = 0; i < r->elements; i++) {
        int rc = slots_row(out, r->element[i], asked_host);
        if (rc != RLOCK_OK) {
            rlk_cluster_map_free(out);
            return rc;
        }
    }
    return RLOCK_OK;
}

/* The value after the field name in a flat [name, value, ...] array, or NULL. */
static const redisReply *field(const redisReply *map, const char *name)
{
    if (map == NULL || map->type != REDIS_REPLY_ARRAY) {
        return NULL;
    }
    size_t nlen = strlen(name);
    for (size_t i = 0; i + 1 < map->elements; i += 2) {
        const redisReply *k = map->element[i];
        if (is_str(k) && k->len == nlen && memcmp(k->str, name, nlen) == 0) {
            return map->element[i + 1];
        }
    }
    return NULL;
}

static int str_is(const redisReply *r, const char *s)
{
    return is_str(r) && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

/* The online master of one shard's "nodes" array, or NULL when the shard has none (its slots
 * then stay unserved until the cluster promotes a replica). */
static const redisReply *shard_master(const redisReply *nodes)
{
    for (size_t i = 0; nodes != NULL && nodes->type == REDIS_REPLY_ARRAY && i < nodes->elements;
         i++) {
        const redisReply *n = nodes->element[i];
        if (str_is(field(n, "role"), "master") && str_is(field(n, "health"), "online")) {
            return n;
        }
    }
    return NULL;
}

static int shard(rlk_cluster_map *m, const redisReply *sh, const char *asked_host, int tls)
{
    const redisReply *slots = field(sh, "slots");
    if (slots == NULL || slots->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0) {
        return rlk_err(RLOCK_EPROTO, "CLUSTER SHARDS: a shard without a slots array");
    }
    const redisReply *master = shard_master(field(sh, "nodes"));
    if (master == NULL || slots->elements == 0) {
        return RLOCK_OK;
    }
    /* A TLS cluster announces tls-port, and port too when its nodes keep a plain port: a TLS
     * client must dial the first, a plain one the second; either falls back to the other. */
    const redisReply *port = field(master, tls ? "tls-port" : "port");
    if (!is_int(port)) {
        port = field(master, tls ? "port" : "tls-port");
    }
    const redisReply *host = field(master, "endpoint");
    if (!is_str(host) || host->len == 0 || str_is(host, "?")) {
        host = field(master, "ip");
    }
    if (!is_int(port)) {
        return rlk_err(RLOCK_EPROTO, "CLUSTER SHARDS: a master without a port");
    }
    for (size_t i = 0; i < slots->elements; i += 2) {
        int rc =
            assign(m, slots->element[i], slots->element[i + 1], host, port->integer, asked_host);
        if (rc != RLOCK_OK) {
            return rc;
        }
    }
    return RLOCK_OK;
}

int rlk_cluster_map_from_shards(const redisReply *r, const char *asked_host, rlk_cluster_map *out)
{
    return rlk_cluster_map_from_shards_tls(r, asked_host, 0, out);
}

int rlk_cluster_map_from_shards_tls(const redisReply *r, const char *asked_host, int tls,
                                    rlk_cluster_map *out)
{
    map_init(out);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return rlk_err(RLOCK_EPROTO, "CLUSTER SHARDS: expected an array reply");
    }
    for (size_t i = 0; i < r->elements; i++) {
        int rc = shard(out, r->element[i], asked_host, tls);
        if (rc != RLOCK_OK) {
            rlk_cluster_map_free(out);
            return rc;
        }
    }
    return RLOCK_OK;
}

/* Parses a decimal number of at most max_digits digits at *p; -1 when there is none. */
static long parse_uint(const char **p, const char *end, int max_digits)
{
    long v = 0;
    int digits = 0;
    while (*p < end && **p >= '0' && **p <= '9' && digits < max_digits) {
        v = v * 10 + (**p - '0');
        (*p)++;
        digits++;
    }
    return digits > 0 ? v : -1;
}

rlk_redirect_kind rlk_cluster_parse_redirect(const char *err, size_t len, rlk_redirect *out)
{
    rlk_redirect_kind kind;
    const char *p = err, *end = err + len;
    if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
        kind = RLK_REDIRECT_MOVED;
        p += 6;
    } else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
        kind = RLK_REDIRECT_ASK;
        p += 4;
    } else {
        return RLK_REDIRECT_NONE;
    }
    long slot = parse_uint(&p, end, 5);
    if (slot < 0 || slot >= RLK_CLUSTER_SLOTS || p >= end || *p != ' ') {
        return RLK_REDIRECT_NONE;
    }
    const char *host = ++p;
    const char *colon = NULL;
    for (const char *q = host; q < end; q++) {
        colon = *q == ':' ? q : colon;
    }
    if (colon == NULL || (size_t)(colon - host) >= sizeof(out->host)) {
        return RLK_REDIRECT_NONE;
    }
    const char *port_at = colon + 1;
    long port = parse_uint(&port_at, end, 5);
    if (port <= 0 || port > 65535 || port_at != end) {
        return RLK_REDIRECT_NONE;
    }
    out->slot = (int)slot;
    memcpy(out->host, host, (size_t)(colon - host));
    out->host[colon - host] = '\0';
    out->port = (int)port;
    return kind;
}
