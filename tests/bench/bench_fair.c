/*
 * Scenario 6: fair lock grant cost against queue length (10, 1,000, 10,000 waiters).
 *
 * Real waiters only: q threads of one client call rlock_lock() on a fair lock that the main
 * thread holds, so the queue (redisson_lock_queue:{name}) holds q live rlock waiters. Once the
 * queue is complete and quiet, the main thread unlocks; every waiter then takes the lock, counts
 * its grant and unlocks, which hands the lock to the next one. Redis' own time spent in the
 * scripts of the hand-offs is read from INFO commandstats (evalsha usec_per_call) over the first
 * grants of the chain, while the queue is still about q long.
 *
 * The waiters' liveness heartbeats are EVALSHA calls too; waiter_timeout_ms is raised to 120 s so
 * that none falls into the measured window (their period is a third of it).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FQ_LEASE_MS 600000

typedef struct fq_run {
    rlock *lock; /* the waiters' handle (shared by the waiter threads) */
    atomic_int granted;
    atomic_int errors;
    char first_error[256];
    pthread_mutex_t mu;
} fq_run;

static void fq_error(fq_run *r, int code)
{
    pthread_mutex_lock(&r->mu);
    if (atomic_fetch_add(&r->errors, 1) == 0) {
        snprintf(r->first_error, sizeof(r->first_error), "%s: %s", rlock_strerror(code),
                 rlock_last_error());
    }
    pthread_mutex_unlock(&r->mu);
}

static void *fq_waiter(void *arg)
{
    fq_run *r = arg;
    int rc = rlock_lock(r->lock, FQ_LEASE_MS);
    if (rc != RLOCK_OK) {
        fq_error(r, rc);
        return NULL;
    }
    atomic_fetch_add(&r->granted, 1);
    rc = rlock_unlock(r->lock);
    if (rc != RLOCK_OK) {
        fq_error(r, rc);
    }
    return NULL;
}

static long long fq_llen(redisContext *c, const char *name)
{
    redisReply *r = bench_cmd(c, "LLEN redisson_lock_queue:{%s}", name);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Waits until no EVALSHA ran for 300 ms (the waiters' second attempts after their SUBSCRIBE was
 * confirmed are over). */
static void fq_quiet(redisContext *ctl)
{
    for (int i = 0; i < 200; i++) {
        bench_cmd_ok(ctl, "CONFIG RESETSTAT");
        bench_sleep_us(300000);
        bench_cmdstats st;
        bench_cmdstats_get(ctl, &st);
        if (bench_cmdstats_calls(&st, "evalsha") == 0) {
            return;
        }
    }
    bench_die("fair queue never went quiet");
}

/* One run with q waiters; measures the first `window` grants. Returns Redis usec per evalsha. */
static double fq_once(rlock_client *cl, redisContext *ctl, int q, int window, double *calls_per,
                      double *build_s)
{
    char name[64];
    snprintf(name, sizeof(name), "bench:fairq:%d", q);
    rlock *holder = rlock_open(cl, RLOCK_FAIR, name);
    fq_run r = {.lock = rlock_open(cl, RLOCK_FAIR, name)};
    pthread_mutex_init(&r.mu, NULL);
    if (holder == NULL || r.lock == NULL || rlock_lock(holder, FQ_LEASE_MS) != RLOCK_OK) {
        bench_die("fair lock: %s", rlock_last_error());
    }
    pthread_t *th = calloc((size_t)q, sizeof(pthread_t));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int64_t t0 = bench_now_ns();
    int64_t give_up = bench_now_ns() + 180 * (int64_t)1000000000;
    /* Waiters join in steps of 250 threads: 10,000 threads calling at once would queue for the
     * pool's 64 connections longer than command_timeout_ms, which is not what is measured. */
    for (int i = 0; i < q; i++) {
        if (pthread_create(&th[i], &attr, fq_waiter, &r) != 0) {
            bench_die("cannot start waiter thread %d", i);
        }
        while ((i + 1) % 250 == 0 && fq_llen(ctl, name) < i + 1 - 50) {
            if (bench_now_ns() > give_up || atomic_load(&r.errors)) {
                bench_die("fair queue of %d: %d errors (%s)", q, atomic_load(&r.errors),
                          r.first_error);
            }
            bench_sleep_us(5000);
        }
    }
    pthread_attr_destroy(&attr);
    while (fq_llen(ctl, name) < q) {
        if (bench_now_ns() > give_up || atomic_load(&r.errors)) {
            bench_die("fair queue of %d never formed (%lld queued; %d errors: %s)", q,
                      fq_llen(ctl, name), atomic_load(&r.errors), r.first_error);
        }
        bench_sleep_us(10000);
    }
    *build_s = (double)(bench_now_ns() - t0) / 1e9;
    fq_quiet(ctl);
    bench_cmd_ok(ctl, "CONFIG RESETSTAT");
    if (rlock_unlock(holder) != RLOCK_OK) {
        bench_die("fair unlock: %s", rlock_last_error());
    }
    while (atomic_load(&r.granted) < window) {
        bench_sleep_us(200);
    }
    int g0 = atomic_load(&r.granted);
    bench_cmdstats st;
    bench_cmdstats_get(ctl, &st);
    int g1 = atomic_load(&r.granted);
    uint64_t calls = bench_cmdstats_calls(&st, "evalsha");
    uint64_t usec = bench_cmdstats_usec(&st, "evalsha");
    *calls_per = (double)calls / ((g0 + g1) / 2.0);
    for (int i = 0; i < q; i++) {
        pthread_join(th[i], NULL);
    }
    free(th);
    if (atomic_load(&r.errors) != 0 || atomic_load(&r.granted) != q) {
        bench_die("fair queue run: %d errors (%s), %d of %d granted", atomic_load(&r.errors),
                  r.first_error, atomic_load(&r.granted), q);
    }
    rlock_free(holder);
    rlock_free(r.lock);
    pthread_mutex_destroy(&r.mu);
    return calls ? (double)usec / (double)calls : NAN;
}

int bench_fair_queue(void)
{
    const char *sc = "fair_grant_vs_queue";
    rlock_options o;
    rlock_options_init(&o);
    o.waiter_timeout_ms = 120000;
    rlock_client *cl = bench_client_opts(0, &o);
    rlock *probe = rlock_open(cl, RLOCK_FAIR, "bench:probe");
    if (probe == NULL) {
        printf("%-22s skipped: %s\n", sc, rlock_last_error());
        rlock_client_free(cl);
        return -1;
    }
    rlock_free(probe);
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    static const int qs[3] = {10, 1000, 10000};
    double usec[3], calls[3], build[3];
    int qn[3];
    for (int k = 0; k < 3; k++) {
        int q = qs[k] == 10 ? 10 : (int)(qs[k] * g_cfg.scale);
        q = q < 10 ? 10 : q;
        qn[k] = q;
        /* Small queues give few grants per run: more runs make up for it. */
        int reps = q <= 10 ? 3 * g_cfg.reps : q <= 1000 ? g_cfg.reps : 1;
        int window = q < 1000 ? q : q / 10;
        double u[64], c[64], b[64];
        reps = reps > 64 ? 64 : reps;
        for (int rep = 0; rep < reps; rep++) {
            u[rep] = fq_once(cl, ctl, q, window, &c[rep], &b[rep]);
        }
        usec[k] = bench_median(u, (size_t)reps);
        calls[k] = bench_median(c, (size_t)reps);
        build[k] = bench_median(b, (size_t)reps);
        char metric[64];
        snprintf(metric, sizeof(metric), "us per EVALSHA, %d waiters", q);
        bench_row_ratio(sc, metric, NAN, usec[k], usec[k] / usec[0],
                        k == 2 ? "ratio to 10 <= 2" : NULL, k == 2 ? usec[k] / usec[0] <= 2 : -1);
    }
    printf("%-22s evalsha calls per grant: %.2f / %.2f / %.2f; queue built in %.2f / %.2f / "
           "%.2f s\n",
           sc, calls[0], calls[1], calls[2], build[0], build[1], build[2]);
    bench_json j;
    bench_json_begin(&j, sc);
    static const char *const size[3] = {"small", "mid", "large"};
    for (int k = 0; k < 3; k++) {
        char key[64];
        snprintf(key, sizeof(key), "waiters_%s", size[k]);
        bench_json_num(&j, key, qn[k]);
        snprintf(key, sizeof(key), "usec_per_evalsha_%s", size[k]);
        bench_json_num(&j, key, usec[k]);
        snprintf(key, sizeof(key), "evalsha_per_grant_%s", size[k]);
        bench_json_num(&j, key, calls[k]);
    }
    bench_json_num(&j, "ratio_large_to_small", usec[2] / usec[0]);
    bench_json_bool(&j, "pass", usec[2] / usec[0] <= 2);
    bench_json_end(&j);
    redisFree(ctl);
    rlock_client_free(cl);
    return 0;
}
