/*
 * Replicated deployments for tests: replicas of a harness server (redis-server --replicaof),
 * started and killed by PID like every harness server, and a wait until the master counts them
 * online. Part of rlock_testcommon.
 */
#ifndef RLOCK_TESTS_TC_REPLICAS_H
#define RLOCK_TESTS_TC_REPLICAS_H

#include <stdint.h>

#include "redis_harness.h"

/* Starts a replica of master; NULL (after a message) on failure. It may still be syncing: see
 * tc_replicas_wait(). */
rh_server *tc_replica_start(const rh_server *master);

/* Waits up to timeout_ms until master reports at least n replicas with state=online and WAIT
 * sees them acknowledge. 0 or -1. */
int tc_replicas_wait(rh_server *master, int n, int64_t timeout_ms);

/* REPLICAOF on s: of `of`, or NO ONE when of is NULL. 0, or -1 after a message. */
int tc_replicaof(rh_server *s, const rh_server *of);
/* To a client of master, a failover to a replica that stopped replicating (REPLICAOF NO ONE) and
 * kept older data: master takes the replica's data with a full sync from it, becomes a master
 * again, and the replica follows it as before. 0, or -1 after a message. */
int tc_roll_back_to(rh_server *master, rh_server *replica);

/* A master with n replicas (n <= 4) all online: 0, or -1 after freeing what was started. */
int tc_replicated_start(rh_server **master, rh_server **replicas, int n);
/* Frees the replicas and the master (any may be NULL) and always returns 0. */
int tc_replicated_stop(rh_server **master, rh_server **replicas, int n);

#endif
