/*
 * Scenario u1_sync: uncontended lock+unlock pairs, one thread, against a master with 2 replicas
 * and replica_sync on (the default), as a replicated deployment runs them.
 *
 * Ideal: raw hiredis sends what rlock sends for rlock_lock(l, 30000) + rlock_unlock(l) with
 * replica sync: each EVALSHA with WAIT 2 1000 pipelined behind it (both written before either
 * reply is read), on a dedicated connection. rlock: the public API on a redis:// client of the
 * same master (which also refreshes its replica count with an INFO behind a synced script once a
 * second: part of its cost). Blocks of pairs alternate between the two sides (ABBA), so both
 * see the same machine load; the ratio is rlock's rate over the ideal's, median over
 * repetitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define S_REPLICAS "2"
#define S_WAIT_MS  "1000"

/* One EVALSHA with WAIT pipelined behind it: 1 when the script answered `want` (the first
 * element of an array, or an integer) and both replicas acknowledged. */
static int s_raw_synced(redisContext *c, int argc, const char **argv, const size_t *lens,
                        long long want)
{
    const char *wait[3] = {"WAIT", S_REPLICAS, S_WAIT_MS};
    redisAppendCommandArgv(c, argc, argv, lens);
    redisAppendCommandArgv(c, 3, wait, NULL);
    redisReply *r = NULL, *w = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || redisGetReply(c, (void **)&w) != REDIS_OK) {
        bench_die("u1_sync: raw connection failed");
    }
    long long v = r->type == REDIS_REPLY_ARRAY     ? r->element[0]->integer
                  : r->type == REDIS_REPLY_INTEGER ? r->integer
                                                   : -1;
    int ok = v == want && w->type == REDIS_REPLY_INTEGER && w->integer == 2;
    freeReplyObject(r);
    freeReplyObject(w);
    return ok;
}

/* What one side's block needs. */
typedef struct s_sides {
    redisContext *c;
    rlock *l;
    bench_pair_cmds cmds; /* the raw side's lock "bench-u1-sync-raw" */
} s_sides;

/* The ideal's pair, both scripts synced. */
static int s_raw_pair(void *arg)
{
    s_sides *sd = arg;
    bench_pair_cmds *p = &sd->cmds;
    return s_raw_synced(sd->c, 7, p->acq, p->acq_len, 1) &&
           s_raw_synced(sd->c, 8, p->rel, p->rel_len, 1);
}

/* A bench_block_fn. */
static double s_block(int raw, int pairs, void *arg)
{
    return bench_lock_block(raw, pairs, ((s_sides *)arg)->l, s_raw_pair, arg, "u1_sync");
}

/* The warm-up of the rlock side, which must send WAIT behind each script as the ideal does
 * (a comparison with an rlock that skipped them would mean nothing). */
static void s_check_waits(s_sides *sd, int pairs)
{
    bench_cmdstats a, b;
    bench_cmdstats_get(sd->c, &a);
    s_block(0, pairs, sd);
    bench_cmdstats_get(sd->c, &b);
    uint64_t waits = bench_cmdstats_calls(&b, "wait") - bench_cmdstats_calls(&a, "wait");
    if (waits != 2 * (uint64_t)pairs) {
        bench_die("u1_sync: rlock sent %llu WAITs for %d pairs", (unsigned long long)waits, pairs);
    }
}

int bench_sync_1(void)
{
    if (g_cfg.sync_port == 0) {
        fprintf(stderr, "u1_sync: skipped (no --sync-port)\n");
        return -1;
    }
    redisContext *c = redisConnect("127.0.0.1", g_cfg.sync_port);
    if (c == NULL || c->err) {
        bench_die("u1_sync: cannot connect to port %d", g_cfg.sync_port);
    }
    bench_load_scripts(c);
    rlock_options o;
    rlock_options_init(&o);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", g_cfg.sync_port);
    o.url = url;
    rlock_client *cl = NULL;
    if (rlock_client_new(&o, &cl) != RLOCK_OK) {
        bench_die("u1_sync: rlock_client_new: %s", rlock_last_error());
    }
    s_sides sd = {.c = c, .l = rlock_open(cl, RLOCK_REENTRANT, "bench-u1-sync-rlock")};
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:999999", rlock_client_id(cl));
    bench_pair_cmds_init(&sd.cmds, "bench-u1-sync-raw", owner);
    int pairs = (int)(200 * g_cfg.scale) + 1;
    s_block(1, pairs, &sd); /* warm-up */
    s_check_waits(&sd, pairs);
    bench_abba_1t("uncontended_sync_1t", "lock+unlock pairs/s (2 replicas, WAIT)", s_block, &sd,
                  pairs);
    redisFree(c);
    rlock_free(sd.l);
    rlock_client_free(cl);
    return 0;
}
