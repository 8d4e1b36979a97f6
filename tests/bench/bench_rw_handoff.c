/*
 * Scenario 8: write-side hand-off of a read-write lock under 8 and 64 waiters (issue 17 item 7).
 *
 * N threads of one process take the write side of ONE lock name in a loop (lock, hold
 * RWH_HOLD_US, unlock, no think time), so every release finds the N - 1 others waiting.
 * Reported: grants per second (the median over the repetitions), for
 *  - rlock's write side (writer preference, the default: every waiter is recorded in
 *    rlock_rwlock_writers:{name} and listens on its own channel);
 *  - its raw ideal: raw hiredis threads, one command and one subscriber connection each, running
 *    the same protocol with no library around it: rw_write_acquire with the same KEYS/ARGV as
 *    rlock's attempt; when busy, wait for a message on the thread's own channel
 *    rlock_rwlock_writer:{name}:<owner>:write at most the returned bound, and retry;
 *    rw_write_release on unlock. (The raw waiters send no heartbeats: every attempt refreshes
 *    their deadline, 5 s, which outlasts their waits here.)
 *  - rlock's fair lock under the same load, the reference the write side is held to.
 * Runs of the three alternate within each repetition; the ratio is the median of the
 * repetitions' rlock / ideal ratios.
 */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "scripts.h"

#define RWH_MAX_THREADS 64
#define RWH_HOLD_US     200

typedef struct rwh_ctx {
    rlock *lock;      /* rlock mode: the handle shared by the threads */
    const char *name; /* raw mode: the lock name */
    atomic_int stop;
    atomic_int ready;
    atomic_long grants;
    atomic_int errors;
} rwh_ctx;

typedef struct rwh_thread {
    rwh_ctx *x;
    int idx;
} rwh_thread;

static int rwh_raw_attempt(redisContext *c, const char *name, const char *owner, long long *bound)
{
    redisReply *r =
        redisCommand(c,
                     "EVALSHA %s 3 %s redisson_lock_token:{%s} "
                     "rlock_rwlock_writers:{%s} 30000 %s:write %s 5000",
                     bench_sha(RLK_SCRIPT_RW_WRITE_ACQUIRE), name, name, name, owner, owner);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        bench_die("raw write acquire failed");
    }
    int ok = r->element[0]->integer == 1;
    *bound = r->element[1]->integer;
    freeReplyObject(r);
    return ok;
}

static void rwh_raw_release(redisContext *c, const char *name, const char *owner)
{
    redisReply *r = redisCommand(c,
                                 "EVALSHA %s 5 %s redisson_rwlock:{%s} {%s}:%s:rwlock_timeout "
                                 "rlock_rwlock_writers:{%s} rlock_rwlock_writer:{%s} %s:write %s",
                                 bench_sha(RLK_SCRIPT_RW_WRITE_RELEASE), name, name, name, owner,
                                 name, name, owner, owner);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        bench_die("raw write release failed");
    }
    freeReplyObject(r);
}

static void *rwh_raw_loop(void *arg)
{
    rwh_thread *t = arg;
    rwh_ctx *x = t->x;
    redisContext *cmd = bench_raw(0);
    redisContext *sub = bench_raw(0);
    char owner[64];
    snprintf(owner, sizeof(owner), "5b1e7c3a-2f4d-4e8b-9a6c-1d2e3f4a5b%02d:%d", t->idx, t->idx + 1);
    redisReply *r =
        redisCommand(sub, "SUBSCRIBE rlock_rwlock_writer:{%s}:%s:write", x->name, owner);
    freeReplyObject(r);
    atomic_fetch_add(&x->ready, 1);
    while (!atomic_load(&x->stop)) {
        /* Messages of earlier releases are stale: drop them before attempting. */
        while (bench_sub_read(sub, 0)) {
        }
        long long bound = 0;
        while (!rwh_raw_attempt(cmd, x->name, owner, &bound)) {
            bench_sub_read(sub, bound > 0 ? (int)bound : 1);
        }
        atomic_fetch_add(&x->grants, 1);
        bench_sleep_us(RWH_HOLD_US);
        rwh_raw_release(cmd, x->name, owner);
    }
    redisFree(sub);
    redisFree(cmd);
    return NULL;
}

static void *rwh_lock_loop(void *arg)
{
    rwh_thread *t = arg;
    rwh_ctx *x = t->x;
    atomic_fetch_add(&x->ready, 1);
    while (!atomic_load(&x->stop)) {
        if (rlock_lock(x->lock, 30000) != RLOCK_OK) {
            atomic_fetch_add(&x->errors, 1);
            return NULL;
        }
        atomic_fetch_add(&x->grants, 1);
        bench_sleep_us(RWH_HOLD_US);
        if (rlock_unlock(x->lock) != RLOCK_OK) {
            atomic_fetch_add(&x->errors, 1);
        }
    }
    return NULL;
}

/* Runs n threads for secs; returns grants/s. */
static double rwh_once(rwh_ctx *x, int n, int raw, double secs)
{
    pthread_t th[RWH_MAX_THREADS];
    rwh_thread t[RWH_MAX_THREADS];
    atomic_store(&x->stop, 0);
    atomic_store(&x->ready, 0);
    for (int i = 0; i < n; i++) {
        t[i] = (rwh_thread){.x = x, .idx = i};
        pthread_create(&th[i], NULL, raw ? rwh_raw_loop : rwh_lock_loop, &t[i]);
    }
    while (atomic_load(&x->ready) < n) {
        bench_sleep_us(1000);
    }
    /* The first grants dial connections and subscribe: count from a warmed-up state. */
    bench_sleep_us(200000);
    long g0 = atomic_load(&x->grants);
    int64_t a = bench_now_ns();
    bench_sleep_us((int64_t)(secs * 1e6));
    long g1 = atomic_load(&x->grants);
    double s = (double)(bench_now_ns() - a) / 1e9;
    atomic_store(&x->stop, 1);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    if (atomic_load(&x->errors)) {
        bench_die("rw hand-off: %d failed calls: %s", atomic_load(&x->errors), rlock_last_error());
    }
    return (double)(g1 - g0) / s;
}

static void rwh_scenario(rlock_client *cl, int n)
{
    char sc[32];
    snprintf(sc, sizeof(sc), "rw_write_handoff_%d", n);
    rwh_ctx w, f, raw;
    memset(&w, 0, sizeof(w));
    memset(&f, 0, sizeof(f));
    memset(&raw, 0, sizeof(raw));
    w.lock = rlock_open(cl, RLOCK_WRITE, "bench:rwh:rlock");
    f.lock = rlock_open(cl, RLOCK_FAIR, "bench:rwh:fair");
    raw.name = "bench:rwh:raw";
    if (w.lock == NULL || f.lock == NULL) {
        bench_die("rw hand-off: %s", rlock_last_error());
    }
    int reps = g_cfg.reps > 32 ? 32 : g_cfg.reps;
    double secs = 2.0 * g_cfg.scale + 0.2;
    double vi[32], vw[32], vf[32], ratio[32];
    for (int rep = 0; rep < reps; rep++) {
        vi[rep] = rwh_once(&raw, n, 1, secs);
        vw[rep] = rwh_once(&w, n, 0, secs);
        vf[rep] = rwh_once(&f, n, 0, secs);
        ratio[rep] = vw[rep] / vi[rep];
    }
    double mi = bench_median(vi, (size_t)reps), mw = bench_median(vw, (size_t)reps);
    double mf = bench_median(vf, (size_t)reps), mr = bench_median(ratio, (size_t)reps);
    bench_row_ratio(sc, "write grants/s", mi, mw, mr, "ratio >= 0.80", mr >= 0.8);
    bench_row(sc, "fair lock grants/s (ref)", NAN, mf, NULL, -1);
    bench_json j;
    bench_json_begin(&j, sc);
    BENCH_JSON_NUMS(&j, {"reps", reps}, {"threads", n}, {"ideal_grants_per_s", mi},
                    {"rlock_write_grants_per_s", mw}, {"rlock_fair_grants_per_s", mf},
                    {"ratio", mr});
    bench_json_bool(&j, "pass", mr >= 0.8);
    bench_json_end(&j);
    rlock_free(w.lock);
    rlock_free(f.lock);
}

int bench_rw_handoff(void)
{
    rlock_client *cl = bench_client(0, 0, 0);
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    rwh_scenario(cl, 8);
    rwh_scenario(cl, 64);
    redisFree(ctl);
    rlock_client_free(cl);
    return 0;
}
