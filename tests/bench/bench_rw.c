/*
 * Scenario 7: read-write lock, 8 readers + 1 writer on one name.
 *
 * Part 1 (readers only, ideal vs rlock): 8 threads take and release the read side in a loop.
 * Ideal: raw hiredis on a connection per thread sends what rlock sends for
 * rlock_lock(read, 30000) + rlock_unlock(read):
 *   EVALSHA rw_read_acquire 4 <name> {<name>}:<owner>:rwlock_timeout redisson_lock_token:{<name>}
 *           rlock_rwlock_writers:{<name>}  30000 <owner> <owner>:write 1
 *   EVALSHA rw_read_release 6 <name> redisson_rwlock:{<name>} {<name>}:<owner>:rwlock_timeout
 *           {<name>} rlock_rwlock_writers:{<name>} rlock_rwlock_writer:{<name>}  <owner>
 * Runs alternate raw and rlock (ABBA BAAB ...); the ratio is the median of the groups' ratios.
 * Part 2 (rlock): the same 8 readers plus 1 writer thread that, every 10 ms, takes the write side
 * (writer preference, the default: new readers wait while it waits), holds it 1 ms and releases
 * it. Reported: reads/s and the writer's wait (call to return) p50/p99.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "scripts.h"

#define RW_READERS 8

typedef struct rw_ctx {
    rlock *rd, *wr;   /* rlock handles (shared by the threads) */
    const char *name; /* raw mode: the lock name */
    int raw;
    atomic_int stop;
    atomic_long reads;
    atomic_int errors;
    bench_samples wait_us; /* the writer's waits */
    int reads_per_thread;  /* part 1: fixed count; part 2: 0 = until stop */
} rw_ctx;

typedef struct rw_reader {
    rw_ctx *x;
    int idx;
} rw_reader;

static int rw_raw_read(redisContext *c, const char *name, const char *owner)
{
    redisReply *r = redisCommand(c,
                                 "EVALSHA %s 4 %s {%s}:%s:rwlock_timeout redisson_lock_token:{%s} "
                                 "rlock_rwlock_writers:{%s} 30000 %s %s:write 1",
                                 bench_sha(RLK_SCRIPT_RW_READ_ACQUIRE), name, name, owner, name,
                                 name, owner, owner);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1;
    freeReplyObject(r);
    r = redisCommand(c,
                     "EVALSHA %s 6 %s redisson_rwlock:{%s} {%s}:%s:rwlock_timeout {%s} "
                     "rlock_rwlock_writers:{%s} rlock_rwlock_writer:{%s} %s",
                     bench_sha(RLK_SCRIPT_RW_READ_RELEASE), name, name, name, owner, name, name,
                     name, owner);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok;
}

static void *rw_read_loop(void *arg)
{
    rw_reader *rd = arg;
    rw_ctx *x = rd->x;
    redisContext *c = x->raw ? bench_raw(0) : NULL;
    char owner[64];
    snprintf(owner, sizeof(owner), "3a9f1c2e-7d4b-4f8a-b6e1-0c5d9e2f7a%02d:%d", rd->idx,
             rd->idx + 1);
    for (int i = 0; x->reads_per_thread == 0 || i < x->reads_per_thread; i++) {
        if (x->reads_per_thread == 0 && atomic_load(&x->stop)) {
            break;
        }
        int ok = x->raw ? rw_raw_read(c, x->name, owner)
                        : rlock_lock(x->rd, 30000) == RLOCK_OK && rlock_unlock(x->rd) == RLOCK_OK;
        if (!ok) {
            atomic_fetch_add(&x->errors, 1);
        }
        atomic_fetch_add(&x->reads, 1);
    }
    if (c != NULL) {
        redisFree(c);
    }
    return NULL;
}

static void *rw_write_loop(void *arg)
{
    rw_ctx *x = arg;
    while (!atomic_load(&x->stop)) {
        int64_t a = bench_now_ns();
        if (rlock_lock(x->wr, 30000) != RLOCK_OK) {
            atomic_fetch_add(&x->errors, 1);
            return NULL;
        }
        bench_samples_add(&x->wait_us, (double)(bench_now_ns() - a) / 1000.0);
        bench_sleep_us(1000);
        if (rlock_unlock(x->wr) != RLOCK_OK) {
            atomic_fetch_add(&x->errors, 1);
        }
        bench_sleep_us(10000);
    }
    return NULL;
}

/* Runs the readers (and the writer if with_writer) and returns reads/s. Part 1 runs a fixed
 * number of reads per thread; part 2 runs for secs. */
static double rw_once(rw_ctx *x, int with_writer, double secs)
{
    pthread_t th[RW_READERS], wt;
    rw_reader rd[RW_READERS];
    atomic_store(&x->stop, 0);
    atomic_store(&x->reads, 0);
    int64_t a = bench_now_ns();
    for (int i = 0; i < RW_READERS; i++) {
        rd[i] = (rw_reader){.x = x, .idx = i};
        pthread_create(&th[i], NULL, rw_read_loop, &rd[i]);
    }
    if (with_writer) {
        pthread_create(&wt, NULL, rw_write_loop, x);
    }
    if (x->reads_per_thread == 0) {
        bench_sleep_us((int64_t)(secs * 1e6));
        atomic_store(&x->stop, 1);
    }
    for (int i = 0; i < RW_READERS; i++) {
        pthread_join(th[i], NULL);
    }
    double s = (double)(bench_now_ns() - a) / 1e9;
    if (with_writer) {
        pthread_join(wt, NULL);
    }
    if (atomic_load(&x->errors)) {
        bench_die("rw: %d failed calls: %s", atomic_load(&x->errors), rlock_last_error());
    }
    return (double)atomic_load(&x->reads) / s;
}

int bench_rw(void)
{
    const char *sc = "rw_8r_1w";
    rlock_client *cl = bench_client(0, 0, 0);
    rw_ctx x;
    memset(&x, 0, sizeof(x));
    x.rd = rlock_open(cl, RLOCK_READ, "bench:rw:rlock");
    x.wr = rlock_open(cl, RLOCK_WRITE, "bench:rw:rlock");
    if (x.rd == NULL || x.wr == NULL) {
        printf("%-22s skipped: %s\n", sc, rlock_last_error());
        rlock_free(x.rd);
        rlock_client_free(cl);
        return -1;
    }
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    x.name = "bench:rw:raw";
    int reps = g_cfg.reps > 32 ? 32 : g_cfg.reps;
    double ratio[128], ideal[32], rl[32], mixed[32];
    int nr = 0;
    x.reads_per_thread = 20; /* warm-up: dials the pool and the raw connections */
    x.raw = 1;
    rw_once(&x, 0, 0);
    x.raw = 0;
    rw_once(&x, 0, 0);
    x.reads_per_thread = (int)(150 * g_cfg.scale) + 10;
    for (int rep = 0; rep < reps; rep++) {
        double si = 0, sr = 0;
        for (int grp = 0; grp < 4; grp++) {
            /* ABBA or BAAB: each group's ratio compares runs next to each other in time. */
            double r[4];
            for (int k = 0; k < 4; k++) {
                x.raw = (k == 0 || k == 3) ^ (grp % 2);
                r[k] = rw_once(&x, 0, 0);
            }
            double ri = grp % 2 ? r[1] + r[2] : r[0] + r[3];
            double rr = grp % 2 ? r[0] + r[3] : r[1] + r[2];
            ratio[nr++] = rr / ri;
            si += ri / 2;
            sr += rr / 2;
        }
        ideal[rep] = si / 4;
        rl[rep] = sr / 4;
    }
    x.reads_per_thread = 0;
    x.raw = 0;
    for (int rep = 0; rep < reps; rep++) {
        mixed[rep] = rw_once(&x, 1, 2.0 * g_cfg.scale + 0.2);
    }
    double mi = bench_median(ideal, (size_t)reps), mr = bench_median(rl, (size_t)reps);
    double mratio = bench_median(ratio, (size_t)nr), mm = bench_median(mixed, (size_t)reps);
    double w50 = bench_pct(&x.wait_us, 50), w99 = bench_pct(&x.wait_us, 99);
    bench_row_ratio(sc, "reads/s, 8 readers", mi, mr, mratio, "ratio >= 0.90", mratio >= 0.9);
    bench_row(sc, "reads/s, 8 readers + writer", mi, mm, NULL, -1);
    bench_row(sc, "writer wait p50 (us)", NAN, w50, NULL, -1);
    bench_row(sc, "writer wait p99 (us)", NAN, w99, NULL, -1);
    bench_json j;
    bench_json_begin(&j, sc);
    BENCH_JSON_NUMS(&j, {"reps", reps}, {"ideal_reads_per_s", mi}, {"rlock_reads_per_s", mr},
                    {"ratio", mratio}, {"rlock_reads_per_s_with_writer", mm},
                    {"writer_acquires", (double)x.wait_us.n}, {"writer_wait_p50_us", w50},
                    {"writer_wait_p99_us", w99});
    bench_json_bool(&j, "pass", mratio >= 0.9);
    bench_json_end(&j);
    bench_samples_free(&x.wait_us);
    rlock_free(x.rd);
    rlock_free(x.wr);
    redisFree(ctl);
    rlock_client_free(cl);
    return 0;
}
