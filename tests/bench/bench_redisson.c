/*
 * Scenario `redisson`: the released Redisson (the Java peer of tests/compat, sync API, default
 * Config, JIT warmed by a first unmeasured round), rlock and the raw ideal on one redis-server,
 * in interleaved blocks: uncontended RLock lock+unlock pairs/s at 1 and 8 threads with the
 * client CPU per pair, and the hand-off latency among 8 contending waiters (Redisson's are
 * threads of one JVM, rlock's are clients of their own in this process); the drain and FIFO
 * queues are in bench_redisson_queue.c. The ideal's hand-off, drain and FIFO are the `handoff`,
 * `drain` and `fair_queue` scenarios'. The peer's jar comes from $RLOCK_REDISSON_JAR; without it
 * the scenario is skipped.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "redisson_java.h"

#define RB_THREADS 8

static rj_peer *g_peer;

static double rb_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The JVM's CPU time so far, in seconds. */
static double rb_java_cpu_s(void)
{
    char *r = rj_call(g_peer, "cpu", "cpu x");
    double ns = rj_reply_ms(r); /* the number after "ok" */
    free(r);
    return ns / 1e9;
}

typedef struct rb_thread {
    int raw, pairs;
    redisContext *conn;
    bench_pair_cmds cmds;
    rlock *l;
    char name[32];
    pthread_barrier_t *start;
    int errors;
} rb_thread;

static void *rb_run(void *arg)
{
    rb_thread *t = arg;
    pthread_barrier_wait(t->start);
    for (int i = 0; i < t->pairs; i++) {
        if (t->raw) {
            redisReply *r = redisCommandArgv(t->conn, 7, t->cmds.acq, t->cmds.acq_len);
            t->errors += r == NULL || r->type != REDIS_REPLY_ARRAY;
            freeReplyObject(r);
            r = redisCommandArgv(t->conn, 8, t->cmds.rel, t->cmds.rel_len);
            t->errors += r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1;
            freeReplyObject(r);
        } else {
            t->errors += rlock_lock(t->l, 30000) != RLOCK_OK || rlock_unlock(t->l) != RLOCK_OK;
        }
    }
    return NULL;
}

/* One block on the C side (raw 1: the ideal, 0: rlock on client c): n threads, pairs each, on
 * names of their own. Pairs per second; *cpu_us the process CPU per pair. */
static double rb_c_block(int raw, rlock_client *c, int n, int pairs, double *cpu_us)
{
    rb_thread t[RB_THREADS];
    pthread_t th[RB_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        t[i] = (rb_thread){.raw = raw, .pairs = pairs, .start = &start};
        snprintf(t[i].name, sizeof(t[i].name), "rb:%s%d", raw ? "i" : "c", i);
        if (raw) {
            t[i].conn = bench_raw(0);
            bench_pair_cmds_init(&t[i].cmds, t[i].name, "6f1c2b1e-0000-4000-8000-0000000000aa:1");
        } else {
            t[i].l = rlock_open(c, RLOCK_REENTRANT, t[i].name);
        }
        pthread_create(&th[i], NULL, rb_run, &t[i]);
    }
    double cpu0 = rb_cpu_s();
    int64_t t0 = bench_now_ns();
    pthread_barrier_wait(&start);
    int errors = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        errors += t[i].errors;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    *cpu_us = (rb_cpu_s() - cpu0) * 1e6 / (n * pairs);
    for (int i = 0; i < n; i++) {
        if (raw) {
            redisFree(t[i].conn);
        } else {
            rlock_free(t[i].l);
        }
    }
    pthread_barrier_destroy(&start);
    if (errors != 0) {
        bench_die("redisson: %d failed pairs on the %s side", errors, raw ? "ideal" : "rlock");
    }
    return n * pairs / secs;
}

/* One block on the Redisson side: n worker threads of the JVM, pairs each, on names of their
 * own. Pairs per second (over the slowest worker's time); *cpu_us the JVM's CPU per pair. */
static double rb_java_block(int n, int pairs, double *cpu_us)
{
    double cpu0 = rb_java_cpu_s();
    int ids[RB_THREADS];
    for (int i = 0; i < n; i++) {
        char worker[8];
        snprintf(worker, sizeof(worker), "b%d", i);
        ids[i] = rj_send(g_peer, worker, "pairs rb:j%d %d", i, pairs);
    }
    double secs = 0;
    for (int i = 0; i < n; i++) {
        char *r = rj_wait(g_peer, ids[i], 600000);
        if (r == NULL || strncmp(r, "ok ", 3) != 0) {
            bench_die("redisson: the peer's pairs failed: %s", r != NULL ? r : "no reply");
        }
        double s = strtod(r + 3, NULL);
        secs = s > secs ? s : secs;
        free(r);
    }
    *cpu_us = (rb_java_cpu_s() - cpu0) * 1e6 / (n * pairs);
    return n * pairs / secs;
}

/* reps rounds of one block of each side, the side first in a round rotating; medians. */
static void rb_uncontended(rlock_client *c, int n, int pairs, const char *metric)
{
    double rate[3][64], cpu[3][64]; /* [ideal, rlock, redisson][rep] */
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    double unused;
    rb_java_block(n, pairs / 4 + 1, &unused); /* warm-up: class loading and the JIT */
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < 3; k++) {
            int side = (rep + k) % 3;
            rate[side][rep] = side == 2 ? rb_java_block(n, pairs, &cpu[side][rep])
                                        : rb_c_block(side == 0, c, n, pairs, &cpu[side][rep]);
        }
    }
    double m[3], mc[3];
    for (int s = 0; s < 3; s++) {
        m[s] = bench_median(rate[s], (size_t)reps);
        mc[s] = bench_median(cpu[s], (size_t)reps);
    }
    printf("%-14s %-26s ideal %10.0f  rlock %10.0f  redisson %10.0f  (redisson/rlock %.2f)\n",
           "redisson", metric, m[0], m[1], m[2], m[2] / m[1]);
    printf("%-14s %-26s ideal %10.1f  rlock %10.1f  redisson %10.1f  (us of client CPU)\n",
           "redisson", "cpu per pair", mc[0], mc[1], mc[2]);
    bench_json j;
    char name[64];
    snprintf(name, sizeof(name), "redisson_u%d", n);
    bench_json_begin(&j, name);
    BENCH_JSON_NUMS(&j, {"threads", n}, {"ideal_pairs_s", m[0]}, {"rlock_pairs_s", m[1]},
                    {"redisson_pairs_s", m[2]}, {"ideal_cpu_us", mc[0]}, {"rlock_cpu_us", mc[1]},
                    {"redisson_cpu_us", mc[2]});
    bench_json_end(&j);
}

/* ---- hand-off among 8 waiters ----------------------------------------------------------- */

typedef struct rb_waiter {
    rlock_client *c;
    rlock *l;
    int rounds;
    atomic_llong *last; /* the last release, ns, shared by the waiters */
    bench_samples *out; /* release-to-grant in us, under mu */
    pthread_mutex_t *mu;
} rb_waiter;

static void *rb_waiter_run(void *arg)
{
    rb_waiter *w = arg;
    long long mine = -1;
    for (int i = 0; i < w->rounds; i++) {
        if (rlock_lock(w->l, 30000) != RLOCK_OK) {
            bench_die("redisson: rlock hand-off lock failed: %s", rlock_last_error());
        }
        long long now = bench_now_ns(), prev = atomic_load(w->last);
        if (prev != 0 && prev != mine) {
            pthread_mutex_lock(w->mu);
            bench_samples_add(w->out, (double)(now - prev) / 1000.0);
            pthread_mutex_unlock(w->mu);
        }
        mine = bench_now_ns();
        atomic_store(w->last, mine);
        rlock_unlock(w->l);
    }
    return NULL;
}

/* 8 rlock clients of this process contend for one name, rounds each. */
static void rb_handoff_c(int rounds, bench_samples *out, int rep)
{
    char name[32];
    snprintf(name, sizeof(name), "rb:hc%d", rep);
    atomic_llong last = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    rb_waiter w[RB_THREADS];
    pthread_t th[RB_THREADS];
    for (int i = 0; i < RB_THREADS; i++) {
        w[i] = (rb_waiter){
            .c = bench_client(0, 0, 0), .rounds = rounds, .last = &last, .out = out, .mu = &mu};
        w[i].l = rlock_open(w[i].c, RLOCK_REENTRANT, name);
    }
    for (int i = 0; i < RB_THREADS; i++) {
        pthread_create(&th[i], NULL, rb_waiter_run, &w[i]);
    }
    for (int i = 0; i < RB_THREADS; i++) {
        pthread_join(th[i], NULL);
        rlock_free(w[i].l);
        rlock_client_free(w[i].c);
    }
}

/* 8 threads of the JVM contend for one name, rounds each. */
static void rb_handoff_java(int rounds, bench_samples *out, int rep)
{
    int ids[RB_THREADS];
    for (int i = 0; i < RB_THREADS; i++) {
        char worker[8];
        snprintf(worker, sizeof(worker), "b%d", i);
        ids[i] = rj_send(g_peer, worker, "handoff rb:hj%d %d", rep, rounds);
    }
    for (int i = 0; i < RB_THREADS; i++) {
        char *r = rj_wait(g_peer, ids[i], 600000);
        if (r == NULL || strncmp(r, "ok", 2) != 0) {
            bench_die("redisson: the peer's hand-off failed: %s", r != NULL ? r : "no reply");
        }
        for (char *p = r + 2; *p != '\0';) {
            char *end;
            double us = strtod(p, &end);
            if (end == p) {
                p++;
                continue;
            }
            bench_samples_add(out, us);
            p = end;
        }
        free(r);
    }
}

static void rb_handoff(int rounds)
{
    bench_samples c = {0}, j = {0};
    rb_handoff_java(rounds / 4 + 1, &j, 99); /* warm-up */
    bench_samples_free(&j);
    j = (bench_samples){0};
    int reps = g_cfg.reps;
    for (int rep = 0; rep < reps; rep++) {
        if (rep % 2 == 0) {
            rb_handoff_c(rounds, &c, rep);
            rb_handoff_java(rounds, &j, rep);
        } else {
            rb_handoff_java(rounds, &j, rep);
            rb_handoff_c(rounds, &c, rep);
        }
    }
    double c50 = bench_pct(&c, 50), c99 = bench_pct(&c, 99);
    double j50 = bench_pct(&j, 50), j99 = bench_pct(&j, 99);
    printf("%-14s %-26s rlock %.0f / %.0f us  redisson %.0f / %.0f us  (%zu / %zu hand-offs; "
           "Redisson's 8 waiters are threads of one JVM)\n",
           "redisson", "hand-off p50 / p99, 8", c50, c99, j50, j99, c.n, j.n);
    bench_json js;
    bench_json_begin(&js, "redisson_handoff");
    BENCH_JSON_NUMS(&js, {"waiters", RB_THREADS}, {"rlock_p50_us", c50}, {"rlock_p99_us", c99},
                    {"redisson_p50_us", j50}, {"redisson_p99_us", j99});
    bench_json_str(&js, "redisson_waiters", "threads of one JVM");
    bench_json_end(&js);
    bench_samples_free(&c);
    bench_samples_free(&j);
}

int bench_redisson(void)
{
    const char *jar = getenv("RLOCK_REDISSON_JAR");
    if (jar == NULL || jar[0] == '\0') {
        printf("redisson: skipped ($RLOCK_REDISSON_JAR names no peer jar; tests/run.sh or "
               "mvn package in tests/compat/java builds it)\n");
        return 1;
    }
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", g_cfg.ports[0]);
    g_peer = rj_start_at(url, 0);
    printf("redisson: Redisson %s (sync API, default Config)\n", rj_version(g_peer));
    redisContext *admin = bench_raw(0);
    bench_load_scripts(admin);
    redisFree(admin);
    rlock_client *c = bench_client(0, 0, 0);
    int pairs = (int)(2000 * g_cfg.scale) + 1;
    rb_uncontended(c, 1, pairs, "pairs/s, 1 thread");
    rb_uncontended(c, RB_THREADS, pairs / 4 + 1, "pairs/s, 8 threads");
    rb_handoff((int)(100 * g_cfg.scale) + 2);
    bench_redisson_queues(g_peer);
    rlock_client_free(c);
    rj_stop(g_peer);
    return 0;
}
