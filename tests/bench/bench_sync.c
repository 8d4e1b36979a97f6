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
#include "scripts.h"

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

/* Runs pairs pairs on one side; returns the pairs per second. */
static double s_block(int raw, int pairs, redisContext *c, rlock *l, const char *name,
                      const char *owner)
{
    char tok[128], ch[128];
    snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", name);
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    const char *acq[7] = {"EVALSHA", bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), "2", name, tok, "30000",
                          owner};
    const char *rel[8] = {
        "EVALSHA", bench_sha(RLK_SCRIPT_LOCK_RELEASE), "2", name, ch, "30000", owner, "0"};
    size_t al[7], rl[8];
    for (int k = 0; k < 8; k++) {
        if (k < 7) {
            al[k] = strlen(acq[k]);
        }
        rl[k] = strlen(rel[k]);
    }
    int64_t a = bench_now_ns();
    for (int i = 0; i < pairs; i++) {
        int ok = raw ? s_raw_synced(c, 7, acq, al, 1) && s_raw_synced(c, 8, rel, rl, 1)
                     : rlock_lock(l, 30000) == RLOCK_OK && rlock_unlock(l) == RLOCK_OK;
        if (!ok) {
            bench_die("u1_sync: a %s pair failed (%s)", raw ? "raw" : "rlock", rlock_last_error());
        }
    }
    return (double)pairs / ((double)(bench_now_ns() - a) / 1e9);
}

static void s_report(const double *ideal, const double *rl, const double *ratio, int reps)
{
    double r = bench_median(ratio, (size_t)reps);
    bench_row_ratio("uncontended_sync_1t", "lock+unlock pairs/s (2 replicas, WAIT)",
                    bench_median(ideal, (size_t)reps), bench_median(rl, (size_t)reps), r, ">= 0.95",
                    r >= 0.95);
    bench_json j;
    bench_json_begin(&j, "uncontended_sync_1t");
    bench_json_num(&j, "reps", reps);
    bench_json_num(&j, "ideal_pairs_per_s", bench_median(ideal, (size_t)reps));
    bench_json_num(&j, "rlock_pairs_per_s", bench_median(rl, (size_t)reps));
    bench_json_num(&j, "ratio", r);
    bench_json_num(&j, "target_ratio", 0.95);
    bench_json_bool(&j, "pass", r >= 0.95);
    bench_json_end(&j);
}

/* The warm-up of the rlock side, which must send WAIT behind each script as the ideal does
 * (a comparison with an rlock that skipped them would mean nothing). */
static void s_check_waits(redisContext *c, int pairs, rlock *l, const char *owner)
{
    bench_cmdstats a, b;
    bench_cmdstats_get(c, &a);
    s_block(0, pairs, c, l, "bench-u1-sync-raw", owner);
    bench_cmdstats_get(c, &b);
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
    rlock *l = rlock_open(cl, RLOCK_REENTRANT, "bench-u1-sync-rlock");
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:999999", rlock_client_id(cl));
    int pairs = (int)(200 * g_cfg.scale) + 1;
    double ratio[64], ideal[64], rl[64];
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    s_block(1, pairs, c, l, "bench-u1-sync-raw", owner); /* warm-up */
    s_check_waits(c, pairs, l, owner);
    for (int rep = 0; rep < reps; rep++) {
        double s[2] = {0, 0};
        for (int b = 0; b < 8; b++) {
            int raw = (b % 4 == 0 || b % 4 == 3);
            s[raw] += 1.0 / s_block(raw, pairs, c, l, "bench-u1-sync-raw", owner);
        }
        ideal[rep] = 4.0 / s[1];
        rl[rep] = 4.0 / s[0];
        ratio[rep] = rl[rep] / ideal[rep];
    }
    s_report(ideal, rl, ratio, reps);
    redisFree(c);
    rlock_free(l);
    rlock_client_free(cl);
    return 0;
}
