/*
 * Private header: a cluster client's view of its Redis Cluster (redis-cluster:// URLs).
 *
 * The client keeps the slot map it read from the cluster (cluster_map.c decodes it) and one
 * connection pool per master, created the first time a command goes there (its connections,
 * like every pool's, dialled on demand, pool_size per node). Every request with keys goes to the
 * master of its first key's slot; redirections are followed by cluster_route.c. The "home" node
 * (recorded as the client's master, so rlk_client_endpoint() names it) serves requests without a
 * key and the subscriber: classic PUBLISH reaches every node of a cluster.
 */
#ifndef RLK_CLUSTER_H
#define RLK_CLUSTER_H

#include <hiredis.h>

#include "context.h"
#include "cluster_map.h"
#include "pool.h"

/* Reads the topology from the URL's seeds (CLUSTER SHARDS, or CLUSTER SLOTS on servers without
 * it), in turn, until one answers with a map; picks the home node. Bounded by deadline_ms.
 * RLOCK_OK, RLOCK_ECONN (no seed answered; the message names each one's failure), RLOCK_EAUTH,
 * RLOCK_ENOMEM. Sets c->cluster. */
int rlk_cluster_new(rlock_client *c, int64_t deadline_ms);
void rlk_cluster_free(rlk_cluster *cl);
/* The node pools' mutexes, held across fork(); in the child, the pools are abandoned
 * (rlk_pool_abandon) and new ones made on demand. */
void rlk_cluster_fork_lock(rlk_cluster *cl);
void rlk_cluster_fork_unlock(rlk_cluster *cl);
void rlk_cluster_abandon_pools(rlk_cluster *cl);

/* The pool of the master that serves slot, and the map's epoch when it was looked up (for
 * rlk_cluster_refresh()). slot -1, or a slot no node serves, gives the home node's pool. NULL
 * only without memory (last error set). */
rlk_pool *rlk_cluster_pool(rlk_cluster *cl, int slot, uint64_t *epoch);
/* The pool of host:port (an ASK or MOVED target), made when new. NULL without memory. */
rlk_pool *rlk_cluster_pool_at(rlk_cluster *cl, const char *host, int port);
/* The address of the master that serves slot in the current map, copied into host
 * (RLK_HOST_MAX bytes) and *port: RLOCK_OK, or RLOCK_ECONN when no node serves it (the
 * subscriber's sharded SSUBSCRIBE goes there). */
int rlk_cluster_owner(rlk_cluster *cl, int slot, char *host, int *port);
/* The index of slot's master in the current map (a grouping key for the watchdog's batches),
 * or -1 when no node serves it. */
int rlk_cluster_node_of(rlk_cluster *cl, int slot);

/* Reads the map again, unless it changed since epoch (someone else refreshed meanwhile). At
 * most one refresh is in flight; callers that come while it runs wait for it. A failed refresh
 * keeps the old map. RLOCK_OK or the refresh's error. */
int rlk_cluster_refresh(rlk_cluster *cl, uint64_t epoch);
/* How often a refused or failed node may make the client read the map again. Until the cluster
 * notices a dead master (cluster-node-timeout) every map still names it, and every request to it
 * fails at once: without a gap each of them would ask the cluster for the same map again. */
#define RLK_CLUSTER_FAILURE_REFRESH_GAP_MS 100
/* rlk_cluster_refresh() after a node could not be reached, unless a refresh ended less than
 * RLK_CLUSTER_FAILURE_REFRESH_GAP_MS ago (then RLOCK_OK without one). A MOVED or READONLY
 * answer is news about the map and refreshes at once (rlk_cluster_refresh). */
int rlk_cluster_refresh_after_failure(rlk_cluster *cl, uint64_t epoch);
/* Records that host:port serves slot now (a MOVED), after a refresh that did not say so yet
 * (the node asked may not have heard of the move). */
void rlk_cluster_note_moved(rlk_cluster *cl, int slot, const char *host, int port);

/* Counters for tests: map refreshes done, MOVED, ASK and TRYAGAIN/CLUSTERDOWN replies seen. */
typedef struct rlk_cluster_stats {
    uint64_t refreshes, moved, ask, tryagain;
} rlk_cluster_stats;
void rlk_cluster_get_stats(rlk_cluster *cl, rlk_cluster_stats *out);
/* For cluster_route.c: counts one redirection of a kind (1 moved, 2 ask, 3 tryagain). */
void rlk_cluster_count(rlk_cluster *cl, int kind);

#endif /* RLK_CLUSTER_H */
