/*
 * Scenario "cluster" (issue 14): uncontended lock+unlock pairs over a Redis Cluster of 3 masters,
 * which the bench starts itself with the test harness (tests/harness/redis_cluster.c: cluster-
 * enabled redis-servers on free loopback ports joined by `redis-cli --cluster create`, killed
 * by PID).
 *
 * Threads share one rlock client on the cluster's seed URL; each thread cycles through CL_NAMES
 * lock names, so the scenario's names spread over the slots and therefore over the 3 masters.
 * Ideal: raw hiredis routing by hand, per thread one connection per master and a slot -> master
 * table read once from CLUSTER SLOTS; per pair it computes the name's slot (CRC16 with hash
 * tags, the function Redis' own test vectors check in tests/cluster) and sends to that master
 * the same two EVALSHA calls as the uncontended ideal (bench_pair_cmds), with the scripts the
 * client runs (the sharded variants when it uses sharded pub/sub). Both sides run in
 * the same ABBA blocks (bench_uncontended_run); Redis' command counts are not compared here,
 * they are the single-server scenarios' concern.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cluster_slot.h"
#include "redis_cluster.h"
#include "scripts.h"

#define CL_MASTERS 3
#define CL_NAMES   4
#define CL_THREADS 8

/* A thread's names, handles and raw connections. */
typedef struct cl_thread {
    char names[CL_NAMES][64];
    bench_pair_cmds cmds[CL_NAMES];
    rlock *locks[CL_NAMES];
    redisContext *node[CL_MASTERS];
    const unsigned char *owner_of; /* slot -> index of its master in node[] */
    unsigned next;
} cl_thread;

static int cl_raw_pair(cl_thread *x, int k)
{
    const char *name = x->names[k];
    redisContext *c = x->node[x->owner_of[rlk_cluster_key_slot(name, strlen(name))]];
    bench_pair_cmds *p = &x->cmds[k];
    redisReply *r = redisCommandArgv(c, 7, p->acq, p->acq_len);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1;
    freeReplyObject(r);
    r = redisCommandArgv(c, 8, p->rel, p->rel_len);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok;
}

static int cl_pair(bench_uthread *t, int raw)
{
    cl_thread *x = t->ext;
    int k = (int)(x->next++ % CL_NAMES);
    if (raw) {
        return cl_raw_pair(x, k);
    }
    return rlock_lock(x->locks[k], 30000) == RLOCK_OK && rlock_unlock(x->locks[k]) == RLOCK_OK;
}

/* The index in ports[] of slot ranges' masters, from one CLUSTER SLOTS reply, into owner_of. */
static void cl_slot_table(redisContext *c, const int *ports, unsigned char *owner_of)
{
    memset(owner_of, 0xff, RLK_CLUSTER_SLOTS);
    redisReply *r = bench_cmd(c, "CLUSTER SLOTS");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *range = r->element[i];
        if (range->elements < 3 || range->element[2]->elements < 2) {
            continue;
        }
        for (int m = 0; m < CL_MASTERS; m++) {
            if (ports[m] != (int)range->element[2]->element[1]->integer) {
                continue;
            }
            for (long long s = range->element[0]->integer; s <= range->element[1]->integer; s++) {
                owner_of[s] = (unsigned char)m;
            }
        }
    }
    freeReplyObject(r);
    for (int s = 0; s < RLK_CLUSTER_SLOTS; s++) {
        if (owner_of[s] == 0xff) {
            bench_die("cluster: slot %d has no master in CLUSTER SLOTS", s);
        }
    }
}

static redisContext *cl_connect(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c == NULL || c->err) {
        bench_die("cluster: cannot connect to 127.0.0.1:%d", port);
    }
    return c;
}

/* The script the client runs for id (its sharded variant when the client publishes with
 * SPUBLISH, rlk_script_for()), loaded on every master, so that the ideal sends what rlock sends:
 * a classic PUBLISH in a cluster is also broadcast to every node over the cluster bus. */
static const char *cl_client_sha(rlock_client *cl, int id, const int *ports)
{
    const rlk_script_src *src = rlk_script_get(rlk_script_for(cl, id));
    for (int m = 0; m < CL_MASTERS; m++) {
        redisContext *c = cl_connect(ports[m]);
        freeReplyObject(bench_cmd(c, "SCRIPT LOAD %b", src->body, src->len));
        redisFree(c);
    }
    return src->sha1;
}

/* Opens thread i's names and connections; counts in per_master how many names each master
 * owns. */
static void cl_thread_init(bench_uthread *t, cl_thread *x, int i, rlock_client *cl,
                           const int *ports, const unsigned char *owner_of, int *per_master)
{
    static const char *acq_sha, *rel_sha;
    if (i == 0) {
        acq_sha = cl_client_sha(cl, RLK_SCRIPT_LOCK_ACQUIRE, ports);
        rel_sha = cl_client_sha(cl, RLK_SCRIPT_LOCK_RELEASE, ports);
    }
    /* Same shape and length as rlock's "<uuid>:<thread-id>". */
    snprintf(t->owner, sizeof(t->owner), "0b7e6a52-3f0c-4d8e-9a51-6c2f1e8d4b%02d:%d", i, i + 1);
    t->pair = cl_pair;
    t->ext = x;
    x->owner_of = owner_of;
    for (int m = 0; m < CL_MASTERS; m++) {
        x->node[m] = cl_connect(ports[m]);
    }
    for (int k = 0; k < CL_NAMES; k++) {
        snprintf(x->names[k], sizeof(x->names[k]), "bench:cluster:%d:%d", i, k);
        bench_pair_cmds_init(&x->cmds[k], x->names[k], t->owner);
        x->cmds[k].acq[1] = acq_sha;
        x->cmds[k].rel[1] = rel_sha;
        x->locks[k] = rlock_open(cl, RLOCK_REENTRANT, x->names[k]);
        if (x->locks[k] == NULL) {
            bench_die("rlock_open: %s", rlock_last_error());
        }
        per_master[owner_of[rlk_cluster_key_slot(x->names[k], strlen(x->names[k]))]]++;
    }
}

static void cl_thread_free(cl_thread *x)
{
    for (int k = 0; k < CL_NAMES; k++) {
        rlock_free(x->locks[k]);
    }
    for (int m = 0; m < CL_MASTERS; m++) {
        redisFree(x->node[m]);
    }
}

/* One scenario on a running cluster: nthreads threads on one client. */
static void cl_scenario(const char *scen, rc_cluster *rc, int nthreads, int pairs)
{
    int ports[CL_MASTERS], per_master[CL_MASTERS] = {0};
    static unsigned char owner_of[RLK_CLUSTER_SLOTS];
    for (int m = 0; m < CL_MASTERS; m++) {
        ports[m] = rh_port(rc_node(rc, m));
    }
    redisContext *ctl = cl_connect(ports[0]);
    cl_slot_table(ctl, ports, owner_of);
    redisFree(ctl);
    rlock_options o;
    rlock_options_init(&o);
    o.url = rc_seed_url(rc);
    rlock_client *cl = NULL;
    if (rlock_client_new(&o, &cl) != RLOCK_OK) {
        bench_die("rlock_client_new(%s): %s", o.url, rlock_last_error());
    }
    bench_uthread ts[CL_THREADS];
    cl_thread xs[CL_THREADS];
    memset(ts, 0, sizeof(ts));
    memset(xs, 0, sizeof(xs));
    for (int i = 0; i < nthreads; i++) {
        cl_thread_init(&ts[i], &xs[i], i, cl, ports, owner_of, per_master);
    }
    printf("  (%s: %d names on the 3 masters: %d / %d / %d)\n", scen, nthreads * CL_NAMES,
           per_master[0], per_master[1], per_master[2]);
    bench_uncontended_run(scen, ts, nthreads, pairs, NULL, 0.90);
    for (int i = 0; i < nthreads; i++) {
        cl_thread_free(&xs[i]);
    }
    rlock_client_free(cl);
}

int bench_cluster(void)
{
    rc_cluster *rc = rc_start(CL_MASTERS, 0);
    if (rc == NULL) {
        printf("cluster: skipped, the harness could not start a cluster (see above)\n");
        return -1;
    }
    for (int m = 0; m < CL_MASTERS; m++) {
        redisContext *c = cl_connect(rh_port(rc_node(rc, m)));
        bench_load_scripts(c);
        redisFree(c);
    }
    cl_scenario("cluster_1t", rc, 1, (int)(3000 * g_cfg.scale) + 10);
    cl_scenario("cluster_8t", rc, CL_THREADS, (int)(1500 * g_cfg.scale) + 10);
    rc_free(rc);
    return 0;
}
