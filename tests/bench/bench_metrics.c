/*
 * Scenario `metrics`: what the always-on metrics cost. The same program of uncontended
 * lock+unlock pairs (bench_pairs.c) runs as rlock_bench_pairs (the library as shipped) and as
 * rlock_bench_pairs_off (its objects built with RLOCK_NO_METRICS), in ABBA order over blocks so
 * that drift on a shared machine falls on both sides alike, on server 0. The cost is
 * 1 - the median over ABBA groups of on/off pairs per second (goal: <= 2%); the client CPU per
 * pair of each side is printed beside it, and the observation calls of one pair timed alone
 * (the part of the difference that is not noise).
 */
#include <libgen.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "context.h"
#include "observe.h"

/* Runs one block of side (0 on, 1 off): pairs/s and CPU us per pair into rate and cpu. */
static void m_block(const char *dir, int side, long pairs, double *rate, double *cpu)
{
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof(cmd), "'%s/rlock_bench_pairs%s' %d bench-metrics-%d %ld", dir,
             side ? "_off" : "", g_cfg.ports[0], side, pairs);
    FILE *p = popen(cmd, "r");
    if (p == NULL || fscanf(p, "%lf %lf", rate, cpu) != 2) {
        bench_die("metrics: %s gave no result", cmd);
    }
    if (pclose(p) != 0) {
        bench_die("metrics: %s failed", cmd);
    }
}

/* The observation calls of one uncontended pair (acquire begin and end, the hold's start time,
 * its release) timed in-process on a client without a hook: ns per pair, median of 5 runs. */
static double m_calls_ns(void)
{
    rlock_client *c = bench_client(0, 0, 0);
    double runs[5];
    for (int r = 0; r < 5; r++) {
        const int n = 1000000;
        int64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++) {
            rlk_obs_wait w;
            rlk_obs_acquire_begin(c, &w, RLOCK_MK_REENTRANT, "bench-metrics", NULL);
            rlk_obs_acquire_end(c, &w, "bench-metrics", NULL, RLOCK_OK, 1, 1);
            int64_t held = rlk_obs_now_ns();
            rlk_obs_release(c, RLOCK_MK_REENTRANT, "bench-metrics", NULL, held, 1);
        }
        runs[r] = (double)(bench_now_ns() - t0) / n;
    }
    rlock_client_free(c);
    return bench_median(runs, 5);
}

int bench_metrics(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        bench_die("metrics: cannot find the bench's own directory");
    }
    exe[n] = '\0';
    const char *dir = dirname(exe);
    long pairs = (long)(4000 * g_cfg.scale) + 1;
    double rate[2] = {0, 0}, cpu[2] = {0, 0};
    double ratios[64];
    int groups = g_cfg.reps < 64 ? g_cfg.reps : 64;
    for (int g = 0; g < groups; g++) {
        double grate[2] = {0, 0};
        for (int b = 0; b < 4; b++) {
            int side = (b == 0 || b == 3) ? 0 : 1; /* ABBA */
            double r = 0, c = 0;
            m_block(dir, side, pairs, &r, &c);
            grate[side] += r;
            cpu[side] += c / 2;
        }
        rate[0] += grate[0] / 2;
        rate[1] += grate[1] / 2;
        ratios[g] = grate[0] / grate[1];
    }
    double ratio = bench_median(ratios, (size_t)groups);
    double cost = 1.0 - ratio;
    bench_row_ratio("metrics", "pairs/s, metrics off vs on", rate[1] / groups, rate[0] / groups,
                    ratio, "cost <= 2%", cost <= 0.02);
    bench_row("metrics", "client CPU us/pair, off vs on", cpu[1] / groups, cpu[0] / groups, "-", 1);
    double calls = m_calls_ns();
    bench_row("metrics", "observation calls ns/pair (in-process)", NAN, calls, "-", 1);
    printf("metrics: cost %.2f%% of uncontended pairs/s (median of %d ABBA groups' on/off)\n",
           cost * 100, groups);
    bench_json j;
    bench_json_begin(&j, "metrics");
    BENCH_JSON_NUMS(&j, {"pairs_per_s_on", rate[0] / groups}, {"pairs_per_s_off", rate[1] / groups},
                    {"cost_pct", cost * 100}, {"cpu_us_on", cpu[0] / groups},
                    {"cpu_us_off", cpu[1] / groups});
    bench_json_end(&j);
    return 0;
}
