/*
 * redis_cluster: see redis_cluster.h.
 */
#include "redis_cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

struct rc_cluster {
    rh_server *nodes[RC_MAX_NODES];
    int n;
    char url[RC_MAX_NODES * 24 + 32];
};

/* The cli that comes with the server the harness runs: "<dir>/<name>-cli" beside
 * "<dir>/<name>-server" (redis-cli, valkey-cli), else redis-cli from PATH. */
static void rc__cli_path(char *out, size_t outlen)
{
    const char *server = rh_server_binary();
    size_t len = server != NULL ? strlen(server) : 0;
    if (len > 7 && strcmp(server + len - 7, "-server") == 0) {
        snprintf(out, outlen, "%.*s-cli", (int)(len - 7), server);
        if (access(out, X_OK) == 0) {
            return;
        }
    }
    const char *slash = server != NULL ? strrchr(server, '/') : NULL;
    if (slash != NULL) {
        snprintf(out, outlen, "%.*s/redis-cli", (int)(slash - server), server);
        if (access(out, X_OK) == 0) {
            return;
        }
    }
    snprintf(out, outlen, "redis-cli");
}

/* The port clients and the cluster bus use: the TLS one on a TLS cluster, where every node's
 * cluster bus listens on its TLS port + 10000. */
static int rc__client_port(const rh_server *s)
{
    return rh_tls_port(s) > 0 ? rh_tls_port(s) : rh_port(s);
}

/* Runs `redis-cli --cluster create <nodes> --cluster-replicas R --cluster-yes` (with --tls and
 * the test CA on a TLS cluster: CLUSTER MEET must name the TLS ports), its output going to
 * create.log in the first node's directory. 0 when it exited with status 0. */
static int rc__create(rc_cluster *cl, int replicas)
{
    char cli[PATH_MAX], log[PATH_MAX], ca[PATH_MAX], reps[16], addrs[RC_MAX_NODES][32];
    const char *argv[RC_MAX_NODES + 12];
    int a = 0;

    rc__cli_path(cli, sizeof(cli));
    snprintf(log, sizeof(log), "%s/create.log", rh_dir(cl->nodes[0]));
    snprintf(reps, sizeof(reps), "%d", replicas);
    argv[a++] = cli;
    if (rh_tls_port(cl->nodes[0]) > 0) {
        snprintf(ca, sizeof(ca), "%s/ca.crt", rh_tls_dir());
        argv[a++] = "--tls";
        argv[a++] = "--cacert";
        argv[a++] = ca;
    }
    argv[a++] = "--cluster";
    argv[a++] = "create";
    for (int i = 0; i < cl->n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", rc__client_port(cl->nodes[i]));
        argv[a++] = addrs[i];
    }
    argv[a++] = "--cluster-replicas";
    argv[a++] = reps;
    argv[a++] = "--cluster-yes";
    argv[a] = NULL;

    pid_t pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(cli, (char *const *)argv);
        _exit(127);
    }
    int status = rh_wait_child(pid, 60000);
    if (status != 0) {
        fprintf(stderr, "redis_cluster: redis-cli --cluster create exited with %d; see %s\n",
                status, log);
        return -1;
    }
    return 0;
}

/* The integer after field (e.g. "master_port:") in an INFO text, or -1. */
static long rc__info_field(const char *info, const char *field)
{
    const char *f = info != NULL ? strstr(info, field) : NULL;
    return f != NULL ? strtol(f + strlen(field), NULL, 10) : -1;
}

/* The "slaveN:...state=online" lines of a master's INFO replication. */
static long rc__count_online(const char *info)
{
    long n = 0;
    for (const char *p = info; (p = strstr(p, "\nslave")) != NULL; p++) {
        const char *eol = strchr(p + 1, '\n');
        const char *st = strstr(p, "state=online");
        n += st != NULL && (eol == NULL || st < eol);
    }
    return n;
}

static int rc__node_ok(rh_server *s)
{
    const char *info_argv[] = {"CLUSTER", "INFO", NULL};
    char *info = rh_cmd_str(s, info_argv);
    int ok = info != NULL && strstr(info, "cluster_state:ok") != NULL &&
             strstr(info, "cluster_slots_assigned:16384") != NULL;
    free(info);
    if (!ok) {
        return 0;
    }
    /* A replica also needs its replication link up before tests may kill its master. */
    const char *repl_argv[] = {"INFO", "replication", NULL};
    char *repl = rh_cmd_str(s, repl_argv);
    ok = repl != NULL &&
         (strstr(repl, "role:master") != NULL || strstr(repl, "master_link_status:up") != NULL);
    /* A master counts a replica whose link is up as online only after its first
     * acknowledgement: until then a client reading INFO would count one replica less. */
    ok = ok && (strstr(repl, "role:master") == NULL ||
                rc__count_online(repl) == rc__info_field(repl, "connected_slaves:"));
    free(repl);
    return ok;
}

int rc_wait_ok(rc_cluster *cl, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    for (;;) {
        int all = 1;
        for (int i = 0; i < cl->n && all; i++) {
            if (rh_pid(cl->nodes[i]) != 0 && !rc__node_ok(cl->nodes[i])) {
                all = 0;
            }
        }
        if (all) {
            return 0;
        }
        if (rh_now_ms() >= deadline) {
            return -1;
        }
        rh_sleep_ms(50);
    }
}

static void rc__build_url(rc_cluster *cl)
{
    size_t off =
        (size_t)snprintf(cl->url, sizeof(cl->url), "%s://",
                         rh_tls_port(cl->nodes[0]) > 0 ? "rediss-cluster" : "redis-cluster");
    for (int i = 0; i < cl->n; i++) {
        off += (size_t)snprintf(cl->url + off, sizeof(cl->url) - off, "%s127.0.0.1:%d",
                                i > 0 ? "," : "", rc__client_port(cl->nodes[i]));
    }
}

rc_cluster *rc_start(int masters, int replicas)
{
    /* Short node timeouts make failovers in tests take about a second, not fifteen. */
    const char *args[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", "1000", "--appendonly", "no",
                          /* A replica's full sync starts at once instead of after the default
                           * 5 s wait for more replicas to share it: every cluster with replicas
                           * was ready 4-5 s later for nothing. rc_wait_ok() still waits until
                           * every master counts all its replicas online. */
                          "--repl-diskless-sync-delay", "0",
                          /* On a TLS node (RH_TLS_DIR) the cluster bus and the replication
                           * links talk TLS too; a plain node stops reading here. */
                          rh_tls_dir() != NULL ? "--tls-cluster" : NULL, "yes", "--tls-replication",
                          "yes", NULL};
    int n = masters * (1 + replicas);
    if (masters < 3 || replicas < 0 || n > RC_MAX_NODES) {
        fprintf(stderr, "redis_cluster: unsupported shape %d masters x %d replicas\n", masters,
                replicas);
        return NULL;
    }
    rc_cluster *cl = calloc(1, sizeof(*cl));
    if (cl == NULL) {
        return NULL;
    }
    for (cl->n = 0; cl->n < n; cl->n++) {
        cl->nodes[cl->n] = rh_start(args);
        if (cl->nodes[cl->n] == NULL) {
            rc_free(cl);
            return NULL;
        }
    }
    rc__build_url(cl);
    if (rc__create(cl, replicas) != 0 || rc_wait_ok(cl, 30000) != 0) {
        fprintf(stderr, "redis_cluster: the cluster did not become ready\n");
        rc_free(cl);
        return NULL;
    }
    return cl;
}

void rc_free(rc_cluster *cl)
{
    if (cl == NULL) {
        return;
    }
    for (int i = 0; i < cl->n; i++) {
        rh_free(cl->nodes[i]);
    }
    free(cl);
}

int rc_node_count(const rc_cluster *cl)
{
    return cl->n;
}

rh_server *rc_node(rc_cluster *cl, int i)
{
    return i >= 0 && i < cl->n ? cl->nodes[i] : NULL;
}

const char *rc_seed_url(const rc_cluster *cl)
{
    return cl->url;
}

/* The port of slot's master in one CLUSTER SLOTS reply, or 0. */
static int rc__owner_port(const redisReply *r, int slot)
{
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2) {
            continue;
        }
        if (slot >= range->element[0]->integer && slot <= range->element[1]->integer) {
            return (int)range->element[2]->element[1]->integer;
        }
    }
    return 0;
}

rh_server *rc_slot_owner(rc_cluster *cl, int slot)
{
    const char *argv[] = {"CLUSTER", "SLOTS", NULL};
    for (int i = 0; i < cl->n; i++) {
        if (rh_pid(cl->nodes[i]) == 0) {
            continue;
        }
        redisReply *r = rh_cmd(cl->nodes[i], argv);
        int port = r != NULL ? rc__owner_port(r, slot) : 0;
        if (r != NULL) {
            freeReplyObject(r);
        }
        for (int j = 0; port != 0 && j < cl->n; j++) {
            if (rh_port(cl->nodes[j]) == port) {
                return cl->nodes[j];
            }
        }
    }
    return NULL;
}

/* INFO replication of s (malloc()ed), NULL when it does not answer. */
static char *rc__replication(rh_server *s)
{
    const char *argv[] = {"INFO", "replication", NULL};
    return rh_pid(s) != 0 ? rh_cmd_str(s, argv) : NULL;
}

/* 1 when s is a replica of master with its link up. */
static int rc__replicates(rh_server *s, rh_server *master)
{
    char *info = rc__replication(s);
    int yes = info != NULL && strstr(info, "role:slave") != NULL &&
              strstr(info, "master_link_status:up") != NULL &&
              rc__info_field(info, "master_port:") == rc__client_port(master);
    free(info);
    return yes;
}

/* 1 when s says it is a master. */
static int rc__is_master(rh_server *s)
{
    char *info = rc__replication(s);
    int yes = info != NULL && strstr(info, "role:master") != NULL;
    free(info);
    return yes;
}

rh_server *rc_replica_of(rc_cluster *cl, rh_server *master)
{
    for (int i = 0; i < cl->n; i++) {
        char *info = cl->nodes[i] != master ? rc__replication(cl->nodes[i]) : NULL;
        int yes = info != NULL && strstr(info, "role:slave") != NULL &&
                  rc__info_field(info, "master_port:") == rc__client_port(master);
        free(info);
        if (yes) {
            return cl->nodes[i];
        }
    }
    return NULL;
}

int rc_online_replicas(rh_server *master)
{
    char *info = rc__replication(master);
    int n = info != NULL ? rc__count_online(info) : -1;
    free(info);
    return n;
}

/* The node replica follows now, or NULL. */
static rh_server *rc__master_of(rc_cluster *cl, rh_server *replica)
{
    char *info = rc__replication(replica);
    long port = rc__info_field(info, "master_port:");
    free(info);
    for (int i = 0; i < cl->n; i++) {
        if (rc__client_port(cl->nodes[i]) == port) {
            return cl->nodes[i];
        }
    }
    return NULL;
}

/* Waits until cond(s, arg) holds, until deadline; 0 or -1 after printing what. */
static int rc__wait(int (*cond)(rh_server *, rh_server *), rh_server *s, rh_server *arg,
                    int64_t deadline, const char *what)
{
    while (!cond(s, arg)) {
        if (rh_now_ms() >= deadline) {
            fprintf(stderr, "redis_cluster: port %d %s\n", rh_port(s), what);
            return -1;
        }
        rh_sleep_ms(20);
    }
    return 0;
}

static int rc__promoted(rh_server *s, rh_server *unused)
{
    (void)unused;
    return rc__is_master(s);
}

int rc_failover(rc_cluster *cl, rh_server *replica, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    rh_server *old = rc__master_of(cl, replica);
    const char *argv[] = {"CLUSTER", "FAILOVER", NULL};
    char *ok = old != NULL ? rh_cmd_str(replica, argv) : NULL;
    int sent = ok != NULL && strcmp(ok, "OK") == 0;
    free(ok);
    if (!sent) {
        fprintf(stderr, "redis_cluster: CLUSTER FAILOVER refused on port %d\n", rh_port(replica));
        return -1;
    }
    /* The old master becomes a replica of the new one: its link must be up too, so that the
     * next switch finds a replica to promote. */
    if (rc__wait(rc__promoted, replica, NULL, deadline, "was not promoted") != 0 ||
        rc__wait(rc__replicates, old, replica, deadline, "did not follow the new master") != 0) {
        return -1;
    }
    int64_t left = deadline - rh_now_ms();
    return rc_wait_ok(cl, left > 0 ? left : 0);
}

rh_server *rc_kill_master_only(rc_cluster *cl, rh_server *master, int64_t timeout_ms)
{
    rh_server *replica = rc_replica_of(cl, master);
    if (replica == NULL || rh_stop(master) != 0) {
        fprintf(stderr, "redis_cluster: port %d has no replica to promote\n", rh_port(master));
        return NULL;
    }
    int64_t deadline = rh_now_ms() + timeout_ms;
    return rc__wait(rc__promoted, replica, NULL, deadline, "was not promoted") == 0 ? replica
                                                                                    : NULL;
}

rh_server *rc_kill_master(rc_cluster *cl, rh_server *master, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    rh_server *replica = rc_kill_master_only(cl, master, timeout_ms);
    if (replica == NULL || rh_restart(master) != 0) {
        return NULL;
    }
    /* Its nodes.conf still gives it the slots under an older epoch; the cluster tells it
     * otherwise and it follows the new master. */
    if (rc__wait(rc__replicates, master, replica, deadline, "did not rejoin as a replica") != 0) {
        return NULL;
    }
    int64_t left = deadline - rh_now_ms();
    return rc_wait_ok(cl, left > 0 ? left : 0) == 0 ? replica : NULL;
}
