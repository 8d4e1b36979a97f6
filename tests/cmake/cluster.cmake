# tests/cmake/cluster.cmake - Redis Cluster support: slot computation.
# Included from tests/CMakeLists.txt; paths are relative to tests/.

rlock_add_test(NAME test_cluster_slot SOURCES cluster/test_cluster_slot.c LABELS unit TIMEOUT 30)
rlock_add_test(NAME test_cluster_slot_redis SOURCES cluster/test_cluster_slot_redis.c
               LABELS redis TIMEOUT 60)
rlock_add_test(NAME test_cluster_harness SOURCES cluster/test_cluster_harness.c
               LABELS redis TIMEOUT 120)
rlock_add_test(NAME test_cluster_map SOURCES cluster/test_cluster_map.c LABELS unit TIMEOUT 30)
rlock_add_test(NAME test_cluster_routing SOURCES cluster/test_cluster_routing.c
               LABELS redis TIMEOUT 120)
rlock_add_test(NAME test_cluster_redirect SOURCES cluster/test_cluster_redirect.c
               LABELS redis TIMEOUT 120)
rlock_add_test(NAME test_cluster_watchdog SOURCES cluster/test_cluster_watchdog.c
               LABELS redis TIMEOUT 180)
rlock_add_test(NAME test_cluster_stress SOURCES cluster/test_cluster_stress.c
               LABELS stress TIMEOUT 240)
rlock_add_test(NAME test_cluster_pubsub SOURCES cluster/test_cluster_pubsub.c
               LABELS redis TIMEOUT 180)

# Replica sync per node: the WAIT count is the serving master's; a master whose replica is
# stopped gives RLOCK_EREPLICA (lock, semaphore, latch, multi-lock) while the others grant.
# Replica sync per master: a replica stopped, a master killed and restarted (~26 s, failover
# logic rather than memory or races): plain build only, to keep tests/run.sh within 40 minutes.
rlock_add_test(NAME test_cluster_replica_sync SOURCES cluster/test_cluster_replica_sync.c
               LABELS redis fault plain_only TIMEOUT 120)

# Failover inside the cluster under stress (4 x 4, replica_sync = 1): CLUSTER FAILOVER of one
# master, then kill -9 of another (its replica promoted by the cluster, the old master back as a
# replica): 0 violations, tokens strictly increasing per name, every process continues; waiters
# on a master that fails over all acquire, the holder's watchdog renews on the new master, and
# its client counts one failover (rlock_failovers_total).
# plain_only: about 25 s a run of failover logic (as the long Sentinel suites), and three
# variants of it would take tests/run.sh past its 40 minutes.
rlock_add_test(NAME test_cluster_failover SOURCES cluster/test_cluster_failover.c
               LABELS redis stress fault plain_only TIMEOUT 240)

# RedLock with cluster clients: one cluster client is not a quorum (RLOCK_EINVAL); over three
# cluster clients each member goes to its name's master, the watchdog keeps the hold, and a
# CLUSTER FAILOVER of one member's master is followed (renewals, release, the next RedLock).
# Plain build only (~13 s a variant, failover logic): tests/run.sh stays within 40 minutes.
rlock_add_test(NAME test_cluster_redlock SOURCES cluster/test_cluster_redlock.c
               LABELS redis fault plain_only TIMEOUT 120)

# rediss-cluster:// on a TLS cluster (RH_TLS_DIR: every node tls-port, tls-cluster and
# tls-replication on, created with redis-cli --tls): every lock kind and a multi-lock over the
# three masters, a waiter woken through sharded pub/sub, MOVED followed to the TLS port, a wrong
# CA is RLOCK_ECONN. The certificates are tls.cmake's (included after this file, hence the path
# spelled out; the fixture is resolved when ctest runs).
rlock_add_test(NAME test_cluster_tls SOURCES cluster/test_cluster_tls.c LABELS redis TIMEOUT 120
               ENV "RH_TLS_DIR=${CMAKE_CURRENT_BINARY_DIR}/tls-certs" FIXTURES_REQUIRED tls_certs)

# Names holding braces: on a cluster a name whose derived keys would leave its slot is refused
# at open time (RLOCK_EINVAL) for every lock kind, the semaphore, the latch and inspect; tagged
# names work there; every name works on a standalone client.
rlock_add_test(NAME test_cluster_names SOURCES cluster/test_cluster_names.c LABELS redis TIMEOUT 120)
