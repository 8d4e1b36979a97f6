/*
 * A Sentinel deployment for tests: three redis-servers (one master, two replicas) and three
 * Sentinels (redis-server --sentinel with a config file) with small timeouts, all harness
 * servers started and killed by PID. Part of rlock_testcommon.
 */
#ifndef RLOCK_TESTS_TC_SENTINEL_H
#define RLOCK_TESTS_TC_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "redis_harness.h"

#define TC_SENTINEL_MASTER "tcmaster"
#define TC_NDATA           3
#define TC_NSENTINEL       3

typedef struct tc_deploy {
    rh_server *data[TC_NDATA]; /* data[0] is the first master */
    rh_server *sentinel[TC_NSENTINEL];
    /* redis-sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3#tcmaster; rediss-sentinel:// and
     * the TLS ports when the program runs over TLS (RH_TLS_DIR). */
    char url[256];
} tc_deploy;

/* Starts the deployment and waits until every Sentinel sees the master, both replicas and the
 * other Sentinels. 0, or -1 after freeing what was started. */
int tc_deploy_start(tc_deploy *d);
/* Frees every server; always 0. */
int tc_deploy_stop(tc_deploy *d);
/* Defines a program's static cmocka group setup() (skipping the program when redis-server is
 * missing) and teardown() that start and stop the deployment in its global d. */
#define TC_DEPLOY_FIXTURE(d)                                                                       \
    static int setup(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        rh_skip_if_unavailable();                                                                  \
        return tc_deploy_start(&(d));                                                              \
    }                                                                                              \
    static int teardown(void **state)                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_deploy_stop(&(d));                                                               \
    }
/* The data server that ROLE calls master (NULL if none does). */
rh_server *tc_deploy_master(tc_deploy *d);
/* A graceful switch: SENTINEL FAILOVER (retried while the Sentinels are not ready for one), then
 * waits until another data server is the master with both replicas online. The new master, or
 * NULL after 30 s. */
rh_server *tc_deploy_failover(tc_deploy *d);
/* A crash: kill -9 of the master by PID, waits until the Sentinels promoted another data server,
 * starts the old one again (empty, on a new port) as a replica of the new master and waits until
 * both replicas are online. The new master, or NULL. */
rh_server *tc_deploy_kill_master(tc_deploy *d);

#endif
