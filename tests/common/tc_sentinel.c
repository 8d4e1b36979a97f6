#include "tc_sentinel.h"

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tc_replicas.h"

/* The port clients use: the TLS one of a TLS server (RH_TLS_DIR), else the plain one. */
static int tc_client_port(const rh_server *s)
{
    return rh_tls_port(s) > 0 ? rh_tls_port(s) : rh_port(s);
}

/* Small timeouts keep a failover within a second or two (down-after 1000 ms, failover-timeout
 * 3000 ms). Over TLS (RH_TLS_DIR: every harness server a TLS server) the Sentinels monitor the
 * master's TLS port and talk TLS to the data nodes (tls-replication), so that they name TLS ports
 * to clients: TLS everywhere, as rediss-sentinel:// expects. */
static rh_server *tc_sentinel_start(const rh_server *master)
{
    char conf[512];
    snprintf(conf, sizeof(conf),
             "sentinel monitor %s 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds %s 1000\n"
             "sentinel failover-timeout %s 3000\n"
             "sentinel parallel-syncs %s 2\n%s",
             TC_SENTINEL_MASTER, tc_client_port(master), TC_SENTINEL_MASTER, TC_SENTINEL_MASTER,
             TC_SENTINEL_MASTER, rh_tls_port(master) > 0 ? "tls-replication yes\n" : "");
    const char *args[] = {"--sentinel", NULL};
    return rh_start_conf(conf, args);
}

/* 1 when s reports the master with 2 replicas and 2 other Sentinels. */
static int tc_sentinel_settled(rh_server *s)
{
    const char *argv[] = {"SENTINEL", "MASTER", TC_SENTINEL_MASTER, NULL};
    redisReply *r = rh_cmd(s, argv);
    int slaves = -1, others = -1;
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str, *v = r->element[i + 1]->str;
        if (k == NULL || v == NULL) {
            continue;
        }
        if (strcmp(k, "num-slaves") == 0) {
            slaves = atoi(v);
        } else if (strcmp(k, "num-other-sentinels") == 0) {
            others = atoi(v);
        }
    }
    freeReplyObject(r);
    return slaves == TC_NDATA - 1 && others == TC_NSENTINEL - 1;
}

/* Points every live data server other than m at m (REPLICAOF; a no-op for one that follows m
 * already). After a kill -9 the Sentinels reconfigure only the replicas they know, and they learn
 * of a replica from the master's INFO every 10 s: a replica started just before the kill would
 * keep following the dead master. The harness does what an operator would. */
static void tc_deploy_follow(tc_deploy *d, rh_server *m)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", tc_client_port(m));
    const char *argv[] = {"REPLICAOF", "127.0.0.1", port, NULL};
    for (int i = 0; i < TC_NDATA; i++) {
        if (d->data[i] != NULL && d->data[i] != m && rh_pid(d->data[i])) {
            free(rh_cmd_str(d->data[i], argv));
        }
    }
}

static int tc_deploy_settle(tc_deploy *d, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    for (int i = 0; i < TC_NSENTINEL; i++) {
        while (!tc_sentinel_settled(d->sentinel[i])) {
            if (rh_now_ms() >= deadline) {
                fprintf(stderr, "tc_deploy: Sentinel %d did not see the deployment in time\n", i);
                return -1;
            }
            rh_sleep_ms(50);
        }
    }
    return 0;
}

int tc_deploy_start(tc_deploy *d)
{
    memset(d, 0, sizeof(*d));
    if (tc_replicated_start(&d->data[0], &d->data[1], TC_NDATA - 1) != 0) {
        return -1;
    }
    int n = snprintf(d->url, sizeof(d->url), "%s://",
                     rh_tls_port(d->data[0]) > 0 ? "rediss-sentinel" : "redis-sentinel");
    for (int i = 0; i < TC_NSENTINEL; i++) {
        d->sentinel[i] = tc_sentinel_start(d->data[0]);
        if (d->sentinel[i] == NULL) {
            tc_deploy_stop(d);
            return -1;
        }
        n += snprintf(d->url + n, sizeof(d->url) - (size_t)n, "%s127.0.0.1:%d", i ? "," : "",
                      tc_client_port(d->sentinel[i]));
    }
    snprintf(d->url + n, sizeof(d->url) - (size_t)n, "#%s", TC_SENTINEL_MASTER);
    if (tc_deploy_settle(d, 20000) != 0) {
        tc_deploy_stop(d);
        return -1;
    }
    return 0;
}

int tc_deploy_stop(tc_deploy *d)
{
    for (int i = 0; i < TC_NSENTINEL; i++) {
        rh_free(d->sentinel[i]);
        d->sentinel[i] = NULL;
    }
    tc_replicated_stop(&d->data[0], &d->data[1], TC_NDATA - 1);
    return 0;
}

/* 1 when s is alive and ROLE calls it master. */
static int tc_is_master(rh_server *s)
{
    const char *argv[] = {"ROLE", NULL};
    redisReply *r = s != NULL && rh_pid(s) ? rh_cmd(s, argv) : NULL;
    int master = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->str != NULL && strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    return master;
}

/* The live data server a Sentinel names as the master (the first Sentinel that names one), else
 * NULL. A failover that a Sentinel gives up, or a second one started because a busy box made the
 * new master look down, can leave two data servers in the master role for a while; the
 * Sentinels' answer is the one that clients follow. */
static rh_server *tc_deploy_named(tc_deploy *d)
{
    const char *argv[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", TC_SENTINEL_MASTER, NULL};
    for (int k = 0; k < TC_NSENTINEL; k++) {
        rh_server *s = d->sentinel[k];
        redisReply *r = s != NULL && rh_pid(s) ? rh_cmd(s, argv) : NULL;
        int port = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                           r->element[1]->str != NULL
                       ? atoi(r->element[1]->str)
                       : 0;
        freeReplyObject(r);
        for (int i = 0; port > 0 && i < TC_NDATA; i++) {
            if (d->data[i] != NULL && rh_pid(d->data[i]) && tc_client_port(d->data[i]) == port) {
                return d->data[i];
            }
        }
    }
    return NULL;
}

/* tc_deploy_named() if ROLE calls it master too, else NULL. */
static rh_server *tc_deploy_named_master(tc_deploy *d)
{
    rh_server *m = tc_deploy_named(d);
    return tc_is_master(m) ? m : NULL;
}

rh_server *tc_deploy_master(tc_deploy *d)
{
    rh_server *named = tc_deploy_named_master(d);
    if (named != NULL) {
        return named;
    }
    for (int i = 0; i < TC_NDATA; i++) {
        if (tc_is_master(d->data[i])) {
            return d->data[i];
        }
    }
    return NULL;
}

/* Prints each data server's view of replication, for a test that failed to bring the deployment
 * back: which server is master, whom each replica follows and whether its link is up. */
static void tc_deploy_dump(tc_deploy *d)
{
    static const char *const keys[] = {
        "role:", "master_port:", "master_link_status:", "connected_slaves:", "slave0:", "slave1:",
        NULL};
    for (int i = 0; i < TC_NDATA; i++) {
        const char *argv[] = {"INFO", "replication", NULL};
        char *info = d->data[i] != NULL && rh_pid(d->data[i]) ? rh_cmd_str(d->data[i], argv) : NULL;
        fprintf(stderr, "tc_deploy: data %d (port %d):", i, d->data[i] ? rh_port(d->data[i]) : 0);
        char *save = NULL;
        for (char *line = info != NULL ? strtok_r(info, "\r\n", &save) : NULL; line != NULL;
             line = strtok_r(NULL, "\r\n", &save)) {
            for (int k = 0; keys[k] != NULL; k++) {
                if (strncmp(line, keys[k], strlen(keys[k])) == 0) {
                    fprintf(stderr, " %s", line);
                }
            }
        }
        fprintf(stderr, "%s\n", info == NULL ? " unreachable" : "");
        free(info);
    }
}

/* Waits until the master has n replicas online. The Sentinels are asked again each round: when
 * they have moved the master meanwhile, the new one is waited for. A replica that has not synced
 * within 10 s is pointed at the master again, as an operator would, at most twice, and only while
 * the Sentinels still name that master (the harness never works against them). The master, or
 * NULL after printing what each server saw. */
static rh_server *tc_deploy_wait_replicas(tc_deploy *d, rh_server *m, int n)
{
    for (int round = 0; round < 3; round++) {
        rh_server *named = tc_deploy_named(d);
        if (named != NULL && named != m) {
            fprintf(stderr, "tc_deploy: the Sentinels moved the master to port %d\n",
                    rh_port(named));
            m = named;
        }
        if (tc_replicas_wait(m, n, 10000) == 0 && tc_deploy_named(d) == m) {
            return m;
        }
        tc_deploy_dump(d);
        if (tc_deploy_named(d) == m && tc_is_master(m)) {
            tc_deploy_follow(d, m);
        }
    }
    return NULL;
}

/* Waits until a data server other than old is the master with replicas replicas online. */
static rh_server *tc_deploy_wait_master(tc_deploy *d, rh_server *old, int replicas)
{
    int64_t deadline = rh_now_ms() + 30000;
    rh_server *m = NULL;
    while ((m = tc_deploy_named_master(d)) == NULL || m == old) {
        if (rh_now_ms() >= deadline) {
            fprintf(stderr, "tc_deploy: no new master within 30 s\n");
            tc_deploy_dump(d);
            return NULL;
        }
        rh_sleep_ms(50);
    }
    return tc_deploy_wait_replicas(d, m, replicas);
}

rh_server *tc_deploy_failover(tc_deploy *d)
{
    rh_server *before = tc_deploy_master(d);
    int64_t deadline = rh_now_ms() + 30000;
    for (int i = 0; rh_now_ms() < deadline; i++) {
        const char *argv[] = {"SENTINEL", "FAILOVER", TC_SENTINEL_MASTER, NULL};
        rh_server *s = d->sentinel[i % TC_NSENTINEL];
        char *ok = s != NULL && rh_pid(s) ? rh_cmd_str(s, argv) : NULL;
        free(ok);
        if (ok != NULL) {
            return tc_deploy_wait_master(d, before, TC_NDATA - 1);
        }
        rh_sleep_ms(300); /* NOGOODSLAVE or INPROG: the Sentinels are not ready yet */
    }
    return NULL;
}

rh_server *tc_deploy_kill_master(tc_deploy *d)
{
    rh_server *old = tc_deploy_master(d);
    if (old == NULL || rh_stop(old) != 0) {
        return NULL;
    }
    rh_server *m = tc_deploy_wait_master(d, old, 0);
    if (m == NULL) {
        return NULL;
    }
    tc_deploy_follow(d, m);
    /* The old master comes back as a replica from its first moment, on a port of its own: on its
     * old port with its old command line it would answer as an empty master until told
     * otherwise, and a client still dialling that address would take locks from a blank data
     * set (a restart without persistence, which no replica sync protects against). */
    for (int i = 0; i < TC_NDATA; i++) {
        if (d->data[i] == old) {
            rh_free(old);
            d->data[i] = tc_replica_start(m);
            if (d->data[i] == NULL) {
                return NULL;
            }
        }
    }
    return tc_deploy_wait_replicas(d, m, TC_NDATA - 1);
}
