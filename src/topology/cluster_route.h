/*
 * The cluster router (cluster_route.c): a request to the master of its slot, redirections
 * followed. route.c calls it for a cluster client.
 */
#ifndef RLK_CLUSTER_ROUTE_H
#define RLK_CLUSTER_ROUTE_H

#include "cluster.h"

/* Runs fn for a request whose keys live in slot (-1: none) on the master that serves it,
 * following MOVED (refresh, then the named node), ASK (ASKING on the named node, the map
 * unchanged), TRYAGAIN and CLUSTERDOWN (short pauses until command_timeout_ms; then
 * RLOCK_ECONN with the server's message). Otherwise as rlk_pool_run(). */
int rlk_cluster_run(rlock_client *c, int slot, int flags, rlk_exchange_fn fn, void *arg,
                    redisReply **out);

#endif
