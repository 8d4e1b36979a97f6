/*
 * Scenario `redisson`, its queues: the drain rate of 16 waiting clients after one release, and
 * the FIFO order (Kendall tau) of 50 fair waiters, Redisson (threads of one JVM) against rlock
 * (clients or threads of this process), on one redis-server.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "redisson_java.h"

#define RQ_DRAIN 16
#define RQ_FIFO  50

typedef struct rq_waiter {
    rlock_client *c;
    rlock *l;
    double got_ms; /* monotonic ms of the grant */
    int rc;
    pthread_t th;
} rq_waiter;

static void *rq_run(void *arg)
{
    rq_waiter *w = arg;
    w->rc = rlock_lock(w->l, 60000);
    w->got_ms = rj_now_ms();
    if (w->rc == RLOCK_OK) {
        rlock_unlock(w->l);
    }
    return NULL;
}

/* Waits until the integer reply of cmd (hiredis format with one %s: key) reaches want. */
static void rq_wait_count(redisContext *admin, const char *cmd, const char *key, long long want)
{
    for (int i = 0; i < 2000; i++) {
        redisReply *r = redisCommand(admin, cmd, key);
        long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        freeReplyObject(r);
        if (v >= want) {
            return;
        }
        bench_sleep_us(2000);
    }
    bench_die("redisson: %s %s never reached %lld", cmd, key, want);
}

/* Kendall tau between arrival order and the order of the grant times got[0..n). */
static double rq_tau(const double *got, int n)
{
    long inv = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            inv += got[i] > got[j];
        }
    }
    return 1.0 - 4.0 * (double)inv / ((double)n * (n - 1));
}

/* rlock: n waiters (clients of their own when own_clients, else threads of one client) queued
 * behind a holder in arrival order (each waits until the previous one is queued, by queue_cmd),
 * released; their grant times in got, the release's time returned. */
static double rq_rlock_queue(rlock_kind kind, const char *name, int n, int own_clients,
                             const char *queue_cmd, const char *queue_key, double *got)
{
    redisContext *admin = bench_raw(0);
    rlock_client *shared = bench_client(0, 0, 0);
    rlock *holder = rlock_open(shared, kind, name);
    rq_waiter *w = calloc((size_t)n, sizeof(*w));
    if (w == NULL || rlock_lock(holder, -1) != RLOCK_OK) {
        bench_die("redisson: rlock queue setup failed");
    }
    for (int i = 0; i < n; i++) {
        w[i].c = own_clients ? bench_client(0, 0, 0) : shared;
        w[i].l = rlock_open(w[i].c, kind, name);
        pthread_create(&w[i].th, NULL, rq_run, &w[i]);
        rq_wait_count(admin, queue_cmd, queue_key, i + 1);
    }
    bench_sleep_us(200000); /* the waiters' attempts after subscribing are over */
    double released = rj_now_ms();
    rlock_unlock(holder);
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        if (w[i].rc != RLOCK_OK) {
            bench_die("redisson: rlock waiter %d: %d", i, w[i].rc);
        }
        got[i] = w[i].got_ms;
        rlock_free(w[i].l);
        if (own_clients) {
            rlock_client_free(w[i].c);
        }
    }
    free(w);
    rlock_free(holder);
    rlock_client_free(shared);
    redisFree(admin);
    return released;
}

/* Redisson: the same with n threads of the JVM (kind "lock" or "fair"); queued in order when
 * queue_key names Redisson's fair queue, else given 1 s to subscribe. */
static double rq_java_queue(rj_peer *p, const char *kind, const char *name, int n,
                            const char *queue_key, double *got)
{
    redisContext *admin = bench_raw(0);
    int *ids = calloc((size_t)n, sizeof(int));
    char *r = rj_call(p, "qh", "lock %s %s -1", kind, name);
    free(r);
    for (int i = 0; i < n; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "q%d", i);
        ids[i] = rj_send(p, worker, "try %s %s 60000 -1", kind, name);
        rj_send(p, worker, "unlock %s %s", kind, name);
        if (queue_key != NULL) {
            rq_wait_count(admin, "LLEN %s", queue_key, i + 1);
        }
    }
    bench_sleep_us(queue_key != NULL ? 200000 : 1000000);
    r = rj_call(p, "qh", "unlock %s %s", kind, name);
    double released = rj_reply_ms(r);
    free(r);
    for (int i = 0; i < n; i++) {
        r = rj_wait(p, ids[i], 120000);
        if (r == NULL || r[0] != '1') {
            bench_die("redisson: Redisson waiter %d: %s", i, r != NULL ? r : "no reply");
        }
        got[i] = rj_reply_ms(r);
        free(r);
    }
    free(ids);
    redisFree(admin);
    return released;
}

static double rq_last(const double *got, int n)
{
    double m = got[0];
    for (int i = 1; i < n; i++) {
        m = got[i] > m ? got[i] : m;
    }
    return m;
}

void bench_redisson_queues(rj_peer *p)
{
    double got[RQ_FIFO], drain[2][64], tau[2][64];
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    for (int rep = 0; rep < reps; rep++) {
        char name[32], key[64];
        snprintf(name, sizeof(name), "rb:d%d", rep);
        snprintf(key, sizeof(key), "rlock_lock_waiters:{%s}", name);
        double t0 = rq_rlock_queue(RLOCK_REENTRANT, name, RQ_DRAIN, 1, "ZCARD %s", key, got);
        drain[0][rep] = RQ_DRAIN / ((rq_last(got, RQ_DRAIN) - t0) / 1000.0);
        snprintf(name, sizeof(name), "rb:dj%d", rep);
        t0 = rq_java_queue(p, "lock", name, RQ_DRAIN, NULL, got);
        drain[1][rep] = RQ_DRAIN / ((rq_last(got, RQ_DRAIN) - t0) / 1000.0);
        snprintf(name, sizeof(name), "rb:f%d", rep);
        snprintf(key, sizeof(key), "redisson_lock_queue:{%s}", name);
        rq_rlock_queue(RLOCK_FAIR, name, RQ_FIFO, 0, "LLEN %s", key, got);
        tau[0][rep] = rq_tau(got, RQ_FIFO);
        snprintf(name, sizeof(name), "rb:fj%d", rep);
        snprintf(key, sizeof(key), "redisson_lock_queue:{%s}", name);
        rq_java_queue(p, "fair", name, RQ_FIFO, key, got);
        tau[1][rep] = rq_tau(got, RQ_FIFO);
    }
    double d0 = bench_median(drain[0], (size_t)reps), d1 = bench_median(drain[1], (size_t)reps);
    double t0 = bench_median(tau[0], (size_t)reps), t1 = bench_median(tau[1], (size_t)reps);
    printf("%-14s %-26s rlock %8.0f/s  redisson %8.0f/s  (16 waiting clients: rlock's own "
           "clients, Redisson's threads of one JVM)\n",
           "redisson", "drain rate, 16 waiting", d0, d1);
    printf("%-14s %-26s rlock %8.3f    redisson %8.3f    (Kendall tau, 1 = arrival order)\n",
           "redisson", "FIFO of 50 fair waiters", t0, t1);
    bench_json j;
    bench_json_begin(&j, "redisson_queues");
    BENCH_JSON_NUMS(&j, {"rlock_drain_per_s", d0}, {"redisson_drain_per_s", d1},
                    {"rlock_fifo_tau", t0}, {"redisson_fifo_tau", t1});
    bench_json_end(&j);
}
