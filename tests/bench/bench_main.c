/*
 * rlock_bench: the benchmark program. Started by tests/bench/run.sh with the ports of
 * redis-servers it started itself; never part of ctest.
 *
 *   rlock_bench --port P [--port P2 --port P3] [--tls-port T --tls-ca CA] [--sync-port S]
 *               [--reps N] [--scale X] [--only a,b,...]
 *
 * Scenarios (names for --only): u1 u1_tls (needs --tls-port) u8 handoff handoff_fair watchdog
 * fair_queue rw rw_handoff redlock sem drain u1_sync handoff_sync handoff_fair_sync drain_sync
 * (the *_sync ones need --sync-port: a master with 2 replicas) cluster (starts a 3-master cluster
 * of its own with the test harness) loop_waits loop_handoff loop_throughput (loop clients on libuv,
 * built when libuv is found). Prints a table while it runs, then one JSON line per scenario.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct bench_scenario {
    const char *name;
    int (*run)(void);
} bench_scenario;

static int run_handoff(void)
{
    return bench_handoff(RLOCK_REENTRANT);
}

static int run_handoff_fair(void)
{
    return bench_handoff(RLOCK_FAIR);
}

static int run_handoff_sync(void)
{
    return bench_on_sync_master(run_handoff, "handoff_sync");
}

static int run_handoff_fair_sync(void)
{
    return bench_on_sync_master(run_handoff_fair, "handoff_fair_sync");
}

static int run_drain_sync(void)
{
    return bench_on_sync_master(bench_drain, "drain_sync");
}

static const bench_scenario g_scenarios[] = {
    {"u1", bench_uncontended_1},
    {"u1_tls", bench_uncontended_tls},
    {"u8", bench_uncontended_8},
    {"handoff", run_handoff},
    {"handoff_fair", run_handoff_fair},
    {"watchdog", bench_watchdog_memory},
    {"fair_queue", bench_fair_queue},
    {"rw", bench_rw},
    {"rw_handoff", bench_rw_handoff},
    {"redlock", bench_redlock},
    {"sem", bench_semaphore},
    {"drain", bench_drain},
    {"u1_sync", bench_sync_1},
    {"cluster", bench_cluster},
    {"redisson", bench_redisson},
    {"handoff_sync", run_handoff_sync},
    {"handoff_fair_sync", run_handoff_fair_sync},
    {"drain_sync", run_drain_sync},
    {"top", bench_top},
    {"metrics", bench_metrics},
#ifdef RLOCK_BENCH_LOOP
    {"loop_waits", bench_loop_waits},
    {"loop_handoff", bench_loop_handoff},
    {"loop_throughput", bench_loop_throughput},
#endif
};

static int selected(const char *only, const char *name)
{
    if (only == NULL) {
        return 1;
    }
    size_t n = strlen(name);
    for (const char *p = only; *p != '\0';) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) {
            return 1;
        }
        p += len + (e != NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc && g_cfg.nports < BENCH_MAX_SERVERS) {
            g_cfg.ports[g_cfg.nports++] = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            g_cfg.reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            g_cfg.scale = atof(argv[++i]);
        } else if (strcmp(argv[i], "--tls-port") == 0 && i + 1 < argc) {
            g_cfg.tls_port = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--tls-ca") == 0 && i + 1 < argc) {
            g_cfg.tls_ca = argv[++i];
        } else if (strcmp(argv[i], "--sync-port") == 0 && i + 1 < argc) {
            g_cfg.sync_port = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: %s --port P [--port P2 --port P3] [--reps N] [--scale X] "
                    "[--only u1,u8,handoff,handoff_fair,watchdog,fair_queue,rw,rw_handoff,"
                    "redlock,sem,drain,u1_sync,handoff_sync,handoff_fair_sync,drain_sync,cluster,"
                    "metrics,loop_waits,loop_handoff,loop_throughput] "
                    "[--sync-port S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (g_cfg.nports == 0 || g_cfg.reps < 1 || g_cfg.scale <= 0) {
        fprintf(stderr, "rlock_bench: need --port, reps >= 1, scale > 0\n");
        return 2;
    }
    bench_table_header();
    int skipped = 0;
    for (size_t i = 0; i < sizeof(g_scenarios) / sizeof(g_scenarios[0]); i++) {
        if (selected(only, g_scenarios[i].name) && g_scenarios[i].run() != 0) {
            skipped++;
        }
    }
    printf("\n");
    bench_print_json_lines();
    if (skipped > 0) {
        printf("%d scenario(s) skipped (see above)\n", skipped);
    }
    return 0;
}
