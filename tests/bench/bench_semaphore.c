/*
 * Scenario "sem": uncontended acquire + release of one plain permit, one thread.
 *
 * Ideal: raw hiredis sends exactly what rlock sends for rlock_semaphore_acquire(s, 1, 0) +
 * rlock_semaphore_release(s, 1), with the same clock read for the attempt's "now":
 *   EVALSHA <sem_acquire> 3 <name> {<name>}:timeout redisson_sc:{<name>} 1 <epoch-ms> 0
 *   EVALSHA <sem_release> 2 <name> redisson_sc:{<name>} 1
 * on a dedicated connection (argv form). Blocks of each side alternate ABBA BAAB so both see
 * the same machine load; the ratio is the median over groups of rlock rate / ideal rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "bench.h"
#include "scripts.h"

enum { S_BLOCKS = 32 };

static int s_raw_pair(redisContext *c, const char *name)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000);
    char to[96], ch[96];
    snprintf(to, sizeof(to), "{%s}:timeout", name);
    snprintf(ch, sizeof(ch), "redisson_sc:{%s}", name);
    const char *acq[9] = {"EVALSHA", bench_sha(RLK_SCRIPT_SEM_ACQUIRE), "3", name, to, ch, "1", now,
                          "0"};
    const char *rel[6] = {"EVALSHA", bench_sha(RLK_SCRIPT_SEM_RELEASE), "2", name, ch, "1"};
    size_t acq_len[9], rel_len[6];
    for (int k = 0; k < 9; k++) {
        acq_len[k] = strlen(acq[k]);
    }
    for (int k = 0; k < 6; k++) {
        rel_len[k] = strlen(rel[k]);
    }
    redisReply *r = redisCommandArgv(c, 9, acq, acq_len);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1;
    freeReplyObject(r);
    r = redisCommandArgv(c, 6, rel, rel_len);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
    return ok;
}

static double s_block(int raw, int pairs, redisContext *conn, rlock_semaphore *s, const char *name,
                      bench_samples *lat)
{
    int64_t a = bench_now_ns();
    for (int i = 0; i < pairs; i++) {
        int64_t t = bench_now_ns();
        int ok = raw ? s_raw_pair(conn, name)
                     : rlock_semaphore_acquire(s, 1, 0) == RLOCK_OK &&
                           rlock_semaphore_release(s, 1) == RLOCK_OK;
        if (!ok) {
            bench_die("semaphore pair failed (%s)", raw ? "raw" : rlock_last_error());
        }
        bench_samples_add(lat, (double)(bench_now_ns() - t) / 1000.0);
    }
    return (double)(bench_now_ns() - a) / 1e9;
}

int bench_semaphore(void)
{
    const char *name = "bench:sem";
    redisContext *ctl = bench_raw(0), *conn = bench_raw(0);
    bench_load_scripts(ctl);
    bench_cmd_ok(ctl, "SET %s 1", name);
    rlock_client *c = bench_client(0, 0, 0);
    rlock_semaphore *s = rlock_semaphore_open(c, name);
    int pairs = (int)(4000 * g_cfg.scale) / S_BLOCKS + 1;
    int modes[S_BLOCKS];
    for (int b = 0; b < S_BLOCKS; b++) {
        modes[b] = (b % 4 == 0 || b % 4 == 3) ^ (b / 4 % 2);
    }
    bench_samples lat[2] = {{0}, {0}}, warm = {0};
    s_block(0, pairs, conn, s, name, &warm); /* dials the pool, faults in code */
    s_block(1, pairs, conn, s, name, &warm);
    bench_samples_free(&warm);
    double ratios[64 * S_BLOCKS / 4], rate[2][64];
    size_t nr = 0;
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    uint64_t evalsha = 0, total_pairs = 0;
    for (int rep = 0; rep < reps; rep++) {
        double secs[2] = {0, 0}, g[2] = {0, 0};
        for (int b = 0; b < S_BLOCKS; b++) {
            int raw = modes[b];
            if (!raw) {
                bench_cmd_ok(ctl, "CONFIG RESETSTAT");
            }
            double t = s_block(raw, pairs, conn, s, name, &lat[raw]);
            if (!raw) {
                bench_cmdstats st;
                bench_cmdstats_get(ctl, &st);
                evalsha += bench_cmdstats_calls(&st, "evalsha");
                total_pairs += (uint64_t)pairs;
            }
            secs[raw] += t;
            g[raw] += t;
            if (b % 4 == 3) {
                ratios[nr++] = g[1] / g[0];
                g[0] = g[1] = 0;
            }
        }
        rate[0][rep] = pairs * (S_BLOCKS / 2) / secs[0];
        rate[1][rep] = pairs * (S_BLOCKS / 2) / secs[1];
    }
    double mi = bench_median(rate[1], (size_t)reps), mr = bench_median(rate[0], (size_t)reps);
    double ratio = bench_median(ratios, nr);
    double cmds = (double)evalsha / (double)total_pairs;
    const char *scen = "semaphore_1t";
    bench_row_ratio(scen, "acquire+release/s (ratio: paired blocks)", mi, mr, ratio,
                    "ratio >= 0.95", ratio >= 0.95);
    double i50 = bench_pct(&lat[1], 50), r50 = bench_pct(&lat[0], 50);
    bench_row(scen, "pair latency p50 (us)", i50, r50, NULL, -1);
    bench_row(scen, "redis commands per pair", 2.0, cmds, "== 2", cmds == 2.0);
    bench_json j;
    bench_json_begin(&j, scen);
    BENCH_JSON_NUMS(&j, {"reps", reps}, {"ideal_pairs_per_s", mi}, {"rlock_pairs_per_s", mr},
                    {"ratio", ratio}, {"commands_per_pair", cmds});
    bench_json_bool(&j, "pass", ratio >= 0.95 && cmds == 2.0);
    bench_json_end(&j);
    bench_samples_free(&lat[0]);
    bench_samples_free(&lat[1]);
    rlock_semaphore_free(s);
    rlock_client_free(c);
    redisFree(conn);
    redisFree(ctl);
    return 0;
}
