/*
 * Private header: a Redis Cluster's slot map and the parsing of what the cluster says about it.
 *
 * The map names the master that serves each of the 16384 slots. It is built from the reply of
 * CLUSTER SHARDS (Redis >= 7.0) or CLUSTER SLOTS (older servers, and 7.x too), and corrected by the
 * MOVED and ASK redirections that a node answers when asked for a key it does not serve. These
 * functions only decode: asking the cluster, and when, is the client's business.
 */
#ifndef RLK_CLUSTER_MAP_H
#define RLK_CLUSTER_MAP_H

#include <hiredis.h>
#include <stdint.h>

#include "cluster_slot.h"

/* A master node, as the cluster announces it. */
typedef struct rlk_cluster_node {
    char *host; /* IP or host name; IPv6 without brackets */
    int port;
} rlk_cluster_node;

typedef struct rlk_cluster_map {
    rlk_cluster_node *nodes; /* the masters that serve at least one slot */
    int n_nodes;
    int16_t owner[RLK_CLUSTER_SLOTS]; /* index into nodes, or -1 for an unserved slot */
} rlk_cluster_map;

/* Builds out from a CLUSTER SHARDS reply: for each shard, the slot ranges and the node whose
 * role is master and whose health is online. A node announced with an empty or "?" address is
 * reached at asked_host, the host the question went to. RLOCK_OK, RLOCK_EPROTO (a reply of
 * another shape, with a message) or RLOCK_ENOMEM; out is left empty on failure. */
int rlk_cluster_map_from_shards(const redisReply *r, const char *asked_host, rlk_cluster_map *out);
/* The same for a client that dials its nodes with TLS when tls is 1: a node that announces both
 * tls-port and port (a TLS cluster whose nodes keep a plain port) is reached at its tls-port;
 * with tls 0 (what rlk_cluster_map_from_shards does) at its port. CLUSTER SLOTS needs no such
 * choice: a node answers it with the port of the connection's kind. */
int rlk_cluster_map_from_shards_tls(const redisReply *r, const char *asked_host, int tls,
                                    rlk_cluster_map *out);
/* The same from a CLUSTER SLOTS reply: [start, end, [host, port, id, ...], replicas...] rows. */
int rlk_cluster_map_from_slots(const redisReply *r, const char *asked_host, rlk_cluster_map *out);
void rlk_cluster_map_free(rlk_cluster_map *m);
/* Adds host:port to m's nodes unless it is there (a MOVED target the map did not know; a copy
 * of another map's nodes). RLOCK_OK or RLOCK_ENOMEM. */
int rlk_cluster_map_add_node(rlk_cluster_map *m, const char *host, int port);
/* The number of slots the map assigns to some node (16384 when the cluster is whole). */
int rlk_cluster_map_covered(const rlk_cluster_map *m);

/* A redirection read from an error reply. */
typedef enum rlk_redirect_kind {
    RLK_REDIRECT_NONE = 0, /* the error is not a redirection */
    RLK_REDIRECT_MOVED,    /* the slot lives elsewhere now: refresh the map and retry there */
    RLK_REDIRECT_ASK       /* the slot is migrating: retry there once after ASKING */
} rlk_redirect_kind;

typedef struct rlk_redirect {
    int slot;
    char host[256]; /* empty when the node announced no address: reuse the one asked */
    int port;
} rlk_redirect;

/* Parses "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" (the host may be an IPv6
 * address, so the port follows the last ':'). Anything else, including a malformed redirection,
 * is RLK_REDIRECT_NONE and leaves out untouched. */
rlk_redirect_kind rlk_cluster_parse_redirect(const char *err, size_t len, rlk_redirect *out);

#endif /* RLK_CLUSTER_MAP_H */
