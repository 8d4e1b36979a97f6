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

/* redis-cli from the directory of the redis-server binary the harness runs, else from PATH. */
static void rc__cli_path(char *out, size_t outlen)
{
    const char *server = rh_server_binary();
    const char *slash = server != NULL ? strrchr(server, '/') : NULL;
    if (slash != NULL) {
        snprintf(out, outlen, "%.*s/redis-cli", (int)(slash - server), server);
        if (access(out, X_OK) == 0) {
            return;
        }
    }
    snprintf(out, outlen, "redis-cli");
}

/* Runs `redis-cli --cluster create <nodes> --cluster-replicas R --cluster-yes`, its output going
 * to create.log in the first node's directory. 0 when it exited with status 0. */
static int rc__create(rc_cluster *cl, int replicas)
{
    char cli[PATH_MAX], log[PATH_MAX], reps[16], addrs[RC_MAX_NODES][32];
    const char *argv[RC_MAX_NODES + 8];
    int a = 0;

    rc__cli_path(cli, sizeof(cli));
    snprintf(log, sizeof(log), "%s/create.log", rh_dir(cl->nodes[0]));
    snprintf(reps, sizeof(reps), "%d", replicas);
    argv[a++] = cli;
    argv[a++] = "--cluster";
    argv[a++] = "create";
    for (int i = 0; i < cl->n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", rh_port(cl->nodes[i]));
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
    size_t off = (size_t)snprintf(cl->url, sizeof(cl->url), "redis-cluster://");
    for (int i = 0; i < cl->n; i++) {
        off += (size_t)snprintf(cl->url + off, sizeof(cl->url) - off, "%s127.0.0.1:%d",
                                i > 0 ? "," : "", rh_port(cl->nodes[i]));
    }
}

rc_cluster *rc_start(int masters, int replicas)
{
    /* Short node timeouts make failovers in tests take about a second, not fifteen. */
    const char *args[] = {"--cluster-enabled",
                          "yes",
                          "--cluster-config-file",
                          "nodes.conf",
                          "--cluster-node-timeout",
                          "1000",
                          "--appendonly",
                          "no",
                          NULL};
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
