#include "tc_replicas.h"

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rh_server *tc_replica_start(const rh_server *master)
{
    /* Replicas of a TLS master (RH_TLS_DIR) replicate over TLS and announce their TLS port, so
     * that Sentinels, which learn replicas from the master, name TLS ports only. */
    int tls = rh_tls_port(master) > 0;
    char port[16];
    snprintf(port, sizeof(port), "%d", tls ? rh_tls_port(master) : rh_port(master));
    /* A short repl-timeout is not set on purpose: tests stop replicas with SIGSTOP and rely on
     * the master still counting them as connected, as it would in production. */
    /* A replica promoted by a failover syncs the others at once, as its master did. */
    const char *args[] = {"--replicaof", "127.0.0.1",         port,  "--repl-diskless-sync-delay",
                          "0",           "--tls-replication", "yes", NULL};
    if (!tls) {
        args[5] = NULL;
    }
    return rh_start(args);
}

/* Replicas with state=online in INFO replication, or -1. */
static int tc_replicas_online(rh_server *master)
{
    const char *argv[] = {"INFO", "replication", NULL};
    char *info = rh_cmd_str(master, argv);
    if (info == NULL) {
        return -1;
    }
    int n = 0;
    for (const char *p = strstr(info, "state=online"); p != NULL;
         p = strstr(p + 1, "state=online")) {
        n++;
    }
    free(info);
    return n;
}

int tc_replicas_wait(rh_server *master, int n, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    while (tc_replicas_online(master) < n) {
        if (rh_now_ms() >= deadline) {
            fprintf(stderr, "tc_replicas_wait: %d replicas not online within %lld ms\n", n,
                    (long long)timeout_ms);
            return -1;
        }
        rh_sleep_ms(20);
    }
    /* "online" in the master's INFO comes before a replica has loaded what it was sent and
     * acknowledged the stream; on a loaded machine that takes longer than a test's short
     * replica_sync_timeout_ms. Wait until WAIT itself sees all n, as the tests' grants will. */
    char nbuf[16];
    snprintf(nbuf, sizeof(nbuf), "%d", n);
    const char *argv[] = {"WAIT", nbuf, "500", NULL};
    /* WAIT waits for this connection's last write only, and a connection that wrote nothing is
     * acknowledged by every replica at once. A PUBLISH on the same connection is a write that
     * reaches the replicas (as the stream's newest entry) and leaves no key behind. */
    const char *publish[] = {"PUBLISH", "tc:replicas-wait", "1", NULL};
    while (rh_cmd_int(master, publish) < 0 || rh_cmd_int(master, argv) < n) {
        if (rh_now_ms() >= deadline) {
            fprintf(stderr, "tc_replicas_wait: %d replicas not acknowledging within %lld ms\n", n,
                    (long long)timeout_ms);
            return -1;
        }
    }
    return 0;
}

int tc_replicaof(rh_server *s, const rh_server *of)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", of != NULL ? rh_port(of) : 0);
    const char *to[] = {"REPLICAOF", "127.0.0.1", port, NULL};
    const char *none[] = {"REPLICAOF", "NO", "ONE", NULL};
    char *ok = rh_cmd_str(s, of != NULL ? to : none);
    int r = ok != NULL && strcmp(ok, "OK") == 0 ? 0 : -1;
    if (r != 0) {
        fprintf(stderr, "tc_replicaof: REPLICAOF answered %s\n", ok != NULL ? ok : "nothing");
    }
    free(ok);
    return r;
}

int tc_roll_back_to(rh_server *master, rh_server *replica)
{
    if (tc_replicaof(master, replica) != 0 || tc_replicas_wait(replica, 1, 10000) != 0 ||
        tc_replicaof(master, NULL) != 0 || tc_replicaof(replica, master) != 0) {
        return -1;
    }
    return tc_replicas_wait(master, 1, 10000);
}

int tc_replicated_start(rh_server **master, rh_server **replicas, int n)
{
    memset(replicas, 0, sizeof(rh_server *) * (size_t)n);
    /* The master syncs each replica at once instead of waiting 5 s for more to ask. Over TLS it
     * replicates over TLS too once a failover demotes it. */
    const char *args[] = {"--repl-diskless-sync-delay", "0", "--tls-replication", "yes", NULL};
    if (rh_tls_dir() == NULL) {
        args[2] = NULL;
    }
    *master = rh_start(args);
    int ok = *master != NULL;
    for (int i = 0; ok && i < n; i++) {
        replicas[i] = tc_replica_start(*master);
        ok = replicas[i] != NULL;
    }
    if (ok && tc_replicas_wait(*master, n, 10000) == 0) {
        return 0;
    }
    tc_replicated_stop(master, replicas, n);
    return -1;
}

int tc_replicated_stop(rh_server **master, rh_server **replicas, int n)
{
    for (int i = 0; i < n; i++) {
        rh_free(replicas[i]);
        replicas[i] = NULL;
    }
    rh_free(*master);
    *master = NULL;
    return 0;
}
