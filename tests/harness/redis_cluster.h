/*
 * redis_cluster: a throw-away Redis Cluster for rlock's tests, built from redis_harness servers.
 *
 * rc_start() starts masters * (1 + replicas) cluster-enabled redis-server processes on free
 * loopback ports (each in its own temp dir, killed by PID like every harness server), joins them
 * with `redis-cli --cluster create ... --cluster-replicas R --cluster-yes` (the tool users run,
 * so the slot layout is the one they get), and returns once every node reports cluster_state:ok
 * with all 16384 slots assigned and every replica's link to its master is up.
 * When RH_TLS_DIR is set (redis_harness.h), every node is a TLS node with tls-cluster and
 * tls-replication on, the cluster is created over TLS, and rc_seed_url() is rediss-cluster://
 * with the TLS ports; the harness's own admin commands still use each node's plain port.
 * Call it from the main thread (see redis_harness.h on PR_SET_PDEATHSIG).
 */
#ifndef RLOCK_TESTS_REDIS_CLUSTER_H
#define RLOCK_TESTS_REDIS_CLUSTER_H

#include "redis_harness.h"

#define RC_MAX_NODES 12

typedef struct rc_cluster rc_cluster;

/* NULL on failure, after printing the reason on stderr. masters >= 3 (redis-cli's minimum). */
rc_cluster *rc_start(int masters, int replicas);
/* Kills every node by PID and frees. NULL is fine. */
void rc_free(rc_cluster *cl);

int rc_node_count(const rc_cluster *cl);
rh_server *rc_node(rc_cluster *cl, int i);
/* "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,..." listing every node as a seed
 * ("rediss-cluster://" and the TLS ports on a TLS cluster). */
const char *rc_seed_url(const rc_cluster *cl);
/* The node that currently serves slot as master (asked with CLUSTER SLOTS), or NULL. */
rh_server *rc_slot_owner(rc_cluster *cl, int slot);
/* Polls every running node until cluster_state:ok on all of them, up to timeout_ms. 0 or -1. */
int rc_wait_ok(rc_cluster *cl, int64_t timeout_ms);

/* The running node that replicates master now (its INFO replication names master's port), or
 * NULL. */
rh_server *rc_replica_of(rc_cluster *cl, rh_server *master);
/* The number of replicas master lists as online in INFO replication, -1 on error. */
int rc_online_replicas(rh_server *master);
/* Runs CLUSTER FAILOVER on replica (a graceful switch: its master pauses writers until the
 * replica caught up, then the replica takes the slots) and waits until replica is a master and
 * every node, the old master now a replica of it with its link up, reports cluster_state:ok.
 * 0, or -1 after timeout_ms. */
int rc_failover(rc_cluster *cl, rh_server *replica, int64_t timeout_ms);
/* A crash: kill -9 of master by PID, waits until the cluster promoted its replica (no
 * command: the replicas elect one after cluster-node-timeout), then starts master again on its
 * port with its nodes.conf and no data, where it rejoins as a replica of the new master, and
 * waits until its link is up and every node reports cluster_state:ok. The new master, or NULL
 * after timeout_ms. */
rh_server *rc_kill_master(rc_cluster *cl, rh_server *master, int64_t timeout_ms);
/* The first half of rc_kill_master(): kill -9 of master, then waits until its replica is
 * promoted; master stays down (rh_restart() brings it back as a replica). The new master, or
 * NULL. */
rh_server *rc_kill_master_only(rc_cluster *cl, rh_server *master, int64_t timeout_ms);

#endif /* RLOCK_TESTS_REDIS_CLUSTER_H */
