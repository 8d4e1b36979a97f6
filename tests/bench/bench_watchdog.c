/*
 * Scenarios 4 and 5: 100,000 watchdog holds in one client.
 *
 * Setup (real use only): one client with default options except command_timeout_ms (see the
 * pause below); 100,000 handles on distinct names, each taken with rlock_lock(l, -1) by 8
 * threads. Memory (scenario 5) is malloc accounting (mallinfo2: uordblks + hblkhd, all arenas)
 * before opening the handles and after the last lock returned, divided by the number of holds;
 * the pool's connections were dialled before the first reading, and no renewal has run yet.
 *
 * Watchdog (scenario 4): holds taken over a few seconds fall due over those seconds too, so to
 * time ONE sweep of all of them the run makes them fall due together, the way a Redis stall
 * does: one "sacrificial" hold is taken a little before the others, and Redis is paused for writes
 * (CLIENT PAUSE WRITE, which holds EVALSHA) from before the sacrificial hold's first renewal
 * until after the last hold's first renewal was due. The watchdog's sweep of the sacrificial
 * hold waits in Redis; meanwhile every other hold falls due; after CLIENT UNPAUSE they are all
 * renewed in one sweep, and they are rescheduled together, so every later cycle is again one
 * sweep of 100,000 holds, which the bench times with the watchdog's counters: from `ticks`
 * growing (the sweep started) to `renewed` reaching +100,000 (its results were applied).
 *
 * Ideal: one raw connection sends the same renew_hash.lua calls (batches of 100 keys, ARGV
 * lease + fields, same keys and owner fields as the holds) as one pipeline; timed from the first
 * append to the last reply, between rlock's sweeps.
 */
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "lock.h"
#include "scripts.h"

#define WD_HOLDS   100000
#define WD_THREADS 8
#define WD_BATCH   100

typedef struct wd_run {
    rlock_client *cl;
    rlock **locks;
    char (*owners)[RLK_OWNER_MAX]; /* owner field of each hold */
    int n;
    pthread_barrier_t locked;  /* workers + main: every hold taken */
    pthread_barrier_t release; /* workers + main: main says unlock */
    atomic_int lock_errors, unlock_errors;
    pthread_t th[WD_THREADS];
    int64_t t0;
} wd_run;

typedef struct wd_arg {
    wd_run *w;
    int slice;
} wd_arg;

/* A hold belongs to the thread that took it, so each worker locks its slice (every
 * WD_THREADS-th handle), waits, and later unlocks the same slice itself. */
static void *wd_worker(void *arg)
{
    wd_arg *a = arg;
    wd_run *w = a->w;
    char owner[RLK_OWNER_MAX];
    rlk_owner(w->cl, rlk_thread_id(), owner);
    for (int k = a->slice; k < w->n; k += WD_THREADS) {
        if (rlock_lock(w->locks[k], -1) != RLOCK_OK) {
            atomic_fetch_add(&w->lock_errors, 1);
        }
        memcpy(w->owners[k], owner, sizeof(owner));
    }
    pthread_barrier_wait(&w->locked);
    pthread_barrier_wait(&w->release);
    for (int k = a->slice; k < w->n; k += WD_THREADS) {
        if (rlock_unlock(w->locks[k]) != RLOCK_OK) {
            atomic_fetch_add(&w->unlock_errors, 1);
        }
    }
    return NULL;
}

static size_t wd_heap(void);

/* Opens n handles "bench:wd:<prefix><i>". *heap0 (if not NULL) is the heap in use after the
 * bench's own arrays were allocated, before the first handle. */
static void wd_open(wd_run *w, rlock_client *cl, int n, const char *prefix, size_t *heap0)
{
    memset(w, 0, sizeof(*w));
    w->cl = cl;
    w->n = n;
    w->locks = calloc((size_t)n, sizeof(rlock *));
    w->owners = calloc((size_t)n, RLK_OWNER_MAX);
    if (w->locks == NULL || w->owners == NULL) {
        bench_die("out of memory");
    }
    if (heap0 != NULL) {
        *heap0 = wd_heap();
    }
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "bench:wd:%s%d", prefix, i);
        w->locks[i] = rlock_open(cl, RLOCK_REENTRANT, name);
        if (w->locks[i] == NULL) {
            bench_die("rlock_open: %s", rlock_last_error());
        }
    }
}

/* Starts the workers and returns once every hold is taken (seconds taken). */
static double wd_lock_all(wd_run *w, wd_arg *args)
{
    pthread_barrier_init(&w->locked, NULL, WD_THREADS + 1);
    pthread_barrier_init(&w->release, NULL, WD_THREADS + 1);
    int64_t a = bench_now_ns();
    for (int i = 0; i < WD_THREADS; i++) {
        args[i] = (wd_arg){.w = w, .slice = i};
        pthread_create(&w->th[i], NULL, wd_worker, &args[i]);
    }
    pthread_barrier_wait(&w->locked);
    if (atomic_load(&w->lock_errors)) {
        bench_die("%d rlock_lock calls failed: %s", atomic_load(&w->lock_errors),
                  rlock_last_error());
    }
    return (double)(bench_now_ns() - a) / 1e9;
}

/* Lets the workers unlock, joins them, frees the handles; returns the unlock failures. */
static int wd_unlock_free(wd_run *w)
{
    pthread_barrier_wait(&w->release);
    for (int i = 0; i < WD_THREADS; i++) {
        pthread_join(w->th[i], NULL);
    }
    pthread_barrier_destroy(&w->locked);
    pthread_barrier_destroy(&w->release);
    for (int i = 0; i < w->n; i++) {
        rlock_free(w->locks[i]);
    }
    free(w->locks);
    free(w->owners);
    return atomic_load(&w->unlock_errors);
}

static size_t wd_heap(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* The raw pipelined sweep over the same keys and fields; returns seconds. */
static double wd_raw_sweep(redisContext *c, wd_run *w, int64_t lease_ms)
{
    const char *sha = bench_sha(RLK_SCRIPT_RENEW_HASH);
    char lease[24], nk[12]; /* nk holds any int: the compiler cannot bound n */
    snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
    snprintf(nk, sizeof(nk), "%d", WD_BATCH);
    const char *argv[3 + 2 * WD_BATCH + 1];
    size_t lens[3 + 2 * WD_BATCH + 1];
    int64_t a = bench_now_ns();
    int batches = 0;
    for (int i = 0; i < w->n; i += WD_BATCH, batches++) {
        int n = w->n - i < WD_BATCH ? w->n - i : WD_BATCH;
        snprintf(nk, sizeof(nk), "%d", n);
        argv[0] = "EVALSHA";
        argv[1] = sha;
        argv[2] = nk;
        argv[3 + n] = lease;
        for (int k = 0; k < n; k++) {
            argv[3 + k] = w->locks[i + k]->name;
            lens[3 + k] = w->locks[i + k]->name_len;
            argv[4 + n + k] = w->owners[i + k];
            lens[4 + n + k] = strlen(w->owners[i + k]);
        }
        lens[0] = 7;
        lens[1] = strlen(sha);
        lens[2] = strlen(nk);
        lens[3 + n] = strlen(lease);
        redisAppendCommandArgv(c, 4 + 2 * n, argv, lens);
    }
    int bad = 0;
    for (int b = 0; b < batches; b++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            bench_die("raw renewal pipeline: %s", c->errstr);
        }
        if (r->type != REDIS_REPLY_ARRAY) {
            bad++;
        } else {
            for (size_t k = 0; k < r->elements; k++) {
                bad += r->element[k]->integer != 1;
            }
        }
        freeReplyObject(r);
    }
    double s = (double)(bench_now_ns() - a) / 1e9;
    if (bad) {
        bench_die("raw renewal: %d holds not renewed", bad);
    }
    return s;
}

/* Waits for the next sweep; returns its duration in seconds (ticks++ to renewed +n) and sets
 * *sweeps to the number of sweeps (ticks) it took. Gives up after timeout_s. */
static double wd_time_sweep(rlk_watchdog *wd, int n, double timeout_s, int *sweeps, int64_t t_from)
{
    rlk_wd_stats s0, s;
    rlk_wd_get_stats(wd, &s0);
    int64_t give_up = bench_now_ns() + (int64_t)(timeout_s * 1e9), start = 0;
    for (;;) {
        rlk_wd_get_stats(wd, &s);
        int64_t now = bench_now_ns();
        if (start == 0 && s.ticks > s0.ticks) {
            start = now;
        }
        if (s.renewed >= s0.renewed + (uint64_t)n) {
            *sweeps = (int)(s.ticks - s0.ticks);
            /* No tick seen: the sweep had started before the call (then t_from says when). */
            start = start ? start : t_from;
            return start ? (double)(now - start) / 1e9 : NAN;
        }
        if (now > give_up) {
            bench_die("watchdog: no full sweep within %.0f s", timeout_s);
        }
        bench_sleep_us(1000);
    }
}

/* Counts the holds whose owner field is present on Redis (pipelined HEXISTS). */
static int wd_count_held(redisContext *c, wd_run *w)
{
    for (int i = 0; i < w->n; i++) {
        redisAppendCommand(c, "HEXISTS %b %s", w->locks[i]->name, w->locks[i]->name_len,
                           w->owners[i]);
    }
    int held = 0;
    for (int i = 0; i < w->n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            bench_die("HEXISTS pipeline: %s", c->errstr);
        }
        held += r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
    }
    return held;
}

static void wd_memory_report(wd_run *w, double per_hold)
{
    /* What the holds should cost: every handle's and hold's malloc chunk (usable size plus
     * glibc's 8-byte header), averaged over the holds. */
    double handles = 0, holds = 0;
    for (int i = 0; i < w->n; i++) {
        handles += (double)malloc_usable_size(w->locks[i]) + 8;
        holds += w->locks[i]->holds ? (double)malloc_usable_size(w->locks[i]->holds) + 8 : 0;
    }
    handles /= w->n;
    holds /= w->n;
    const char *sc = "memory_100k_holds";
    bench_row(sc, "client bytes per held lock", NAN, per_hold, "<= 256", per_hold <= 256);
    printf("%-22s breakdown per hold: handle chunk %.1f B (sizeof(struct rlock) %zu + name "
           "%u+1), hold chunk %.1f B (sizeof(rlk_hold) %zu), other %.1f B\n",
           sc, handles, sizeof(struct rlock), w->locks[0]->name_len, holds, sizeof(rlk_hold),
           per_hold - handles - holds);
    bench_json j;
    bench_json_begin(&j, sc);
    bench_json_num(&j, "holds", w->n);
    bench_json_num(&j, "bytes_per_hold", per_hold);
    bench_json_num(&j, "handle_chunk_bytes", handles);
    bench_json_num(&j, "hold_chunk_bytes", holds);
    bench_json_num(&j, "sizeof_rlock", (double)sizeof(struct rlock));
    bench_json_num(&j, "sizeof_hold", (double)sizeof(rlk_hold));
    bench_json_num(&j, "target_bytes", 256);
    bench_json_bool(&j, "pass", per_hold <= 256);
    bench_json_end(&j);
}

/* What the sweep part measured. */
typedef struct wd_cycles {
    int reps, sweeps_max, n;
    int64_t lease;
    double first, acq_s;
    double sweep[64], raw[64], ratio[64], redis_raw[64], redis_rl[64];
    rlk_wd_stats st0, st1;
} wd_cycles;

/* Makes every hold fall due together (see the top of the file), then times reps sweeps of
 * rlock's watchdog, each after a raw sweep of the same holds. */
static void wd_measure_sweeps(redisContext *ctl, rlk_watchdog *wd, wd_run *w, rlock *sac,
                              int64_t t_last, wd_cycles *cy)
{
    int64_t period = cy->lease / 3;
    /* Hold EVALSHA from before the sacrificial hold's renewal until every hold is due. */
    bench_cmd_ok(ctl, "CLIENT PAUSE %lld WRITE", (long long)(period * 3));
    int64_t unpause_at = t_last + (period + 300) * 1000000;
    while (bench_now_ns() < unpause_at) {
        bench_sleep_us(10000);
    }
    bench_cmd_ok(ctl, "CLIENT UNPAUSE");
    int sw = 0;
    cy->first = wd_time_sweep(wd, cy->n, 3.0 * period / 1000, &sw, bench_now_ns());
    if (rlock_unlock(sac) != RLOCK_OK) {
        bench_die("sacrificial unlock: %s", rlock_last_error());
    }
    for (int c = 0; c < cy->reps; c++) {
        /* Redis' own time in the renewal scripts of each side, from INFO commandstats. */
        bench_cmdstats cs;
        bench_cmd_ok(ctl, "CONFIG RESETSTAT");
        cy->raw[c] = wd_raw_sweep(ctl, w, cy->lease);
        bench_cmdstats_get(ctl, &cs);
        cy->redis_raw[c] = (double)bench_cmdstats_usec(&cs, "evalsha") / 1000.0;
        bench_cmd_ok(ctl, "CONFIG RESETSTAT");
        cy->sweep[c] = wd_time_sweep(wd, cy->n, 3.0 * period / 1000, &sw, 0);
        bench_cmdstats_get(ctl, &cs);
        cy->redis_rl[c] = (double)bench_cmdstats_usec(&cs, "evalsha") / 1000.0;
        cy->ratio[c] = cy->raw[c] / cy->sweep[c];
        cy->sweeps_max = sw > cy->sweeps_max ? sw : cy->sweeps_max;
    }
}

static void wd_sweep_report(const wd_cycles *cy, int lost)
{
    size_t reps = (size_t)cy->reps;
    double ms = bench_median(cy->sweep, reps), mr = bench_median(cy->raw, reps);
    double ratio = bench_median(cy->ratio, reps);
    double rr = bench_median(cy->redis_raw, reps);
    double rl = bench_median(cy->redis_rl, reps);
    const char *sc = "watchdog_100k_holds";
    int pass = ms <= 1.0 && ratio >= 0.9 && lost == 0 && cy->sweeps_max == 1;
    bench_row(sc, "full sweep wall time (ms)", mr * 1000, ms * 1000, "rlock <= 1000 ms", ms <= 1.0);
    bench_row_ratio(sc, "renewals/s (ratio: paired)", cy->n / mr, cy->n / ms, ratio,
                    "ratio >= 0.90", ratio >= 0.9);
    bench_row(sc, "Redis time in the scripts (ms)", rr, rl, NULL, -1);
    bench_row(sc, "sweeps per cycle / holds lost", 1, cy->sweeps_max, "1 sweep, 0 lost",
              cy->sweeps_max == 1 && lost == 0);
    printf("%-22s after the stall: first sweep %.0f ms; %d holds taken in %.2f s; %d lost\n", sc,
           cy->first * 1000, cy->n, cy->acq_s, lost);
    bench_json j;
    bench_json_begin(&j, sc);
    bench_json_num(&j, "holds", cy->n);
    bench_json_num(&j, "reps", cy->reps);
    bench_json_num(&j, "lease_ms", (double)cy->lease);
    bench_json_num(&j, "ideal_sweep_ms", mr * 1000);
    bench_json_num(&j, "rlock_sweep_ms", ms * 1000);
    bench_json_num(&j, "ratio", ratio);
    bench_json_num(&j, "ideal_redis_script_ms", rr);
    bench_json_num(&j, "rlock_redis_script_ms", rl);
    bench_json_num(&j, "rlock_first_sweep_after_stall_ms", cy->first * 1000);
    bench_json_num(&j, "sweeps_per_cycle_max", cy->sweeps_max);
    bench_json_num(&j, "batches", (double)(cy->st1.batches - cy->st0.batches));
    bench_json_num(&j, "pipelines", (double)(cy->st1.pipelines - cy->st0.pipelines));
    bench_json_num(&j, "lost", lost);
    bench_json_bool(&j, "pass", pass);
    bench_json_end(&j);
}

int bench_watchdog_memory(void)
{
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    /* Default options, except a renewal period (lease/3 = 15 s) longer than taking 100,000
     * holds on a loaded 2-core machine, and a command timeout longer than the pause below. */
    rlock_client *cl = bench_client(0, 45000, 60000);
    wd_cycles *cy = calloc(1, sizeof(*cy));
    if (cy == NULL) {
        bench_die("out of memory");
    }
    cy->lease = cl->opts.watchdog_timeout_ms;
    cy->n = (int)(WD_HOLDS * g_cfg.scale);
    cy->n = cy->n < 1000 ? 1000 : cy->n;
    /* Each cycle lasts a renewal period (15 s): 5 of them are enough for a median. */
    cy->reps = g_cfg.reps > 5 ? 5 : g_cfg.reps;
    wd_run w;
    wd_arg args[WD_THREADS];
    /* Warm-up: dials the pool, creates the threads' malloc arenas, registers the thread ids. */
    wd_open(&w, cl, 8 * WD_THREADS, "warm", NULL);
    wd_lock_all(&w, args);
    wd_unlock_free(&w);
    rlock *sac = rlock_open(cl, RLOCK_REENTRANT, "bench:wd:sacrificial");
    if (sac == NULL || rlock_lock(sac, -1) != RLOCK_OK) {
        bench_die("sacrificial hold: %s", rlock_last_error());
    }
    int64_t t_sac = bench_now_ns();
    /* The watchdog renews together what falls due within a slack of a tenth of the shortest
     * renewal period (watchdog.c); the other holds must come later than that, so that the sweep
     * that waits out the pause holds the sacrificial hold alone. */
    int64_t wait_ms = cl->opts.watchdog_timeout_ms < cl->opts.waiter_timeout_ms
                          ? cl->opts.watchdog_timeout_ms
                          : cl->opts.waiter_timeout_ms;
    bench_sleep_us((wait_ms / 30 + 100) * 1000);
    size_t heap0 = 0;
    wd_open(&w, cl, cy->n, "", &heap0);
    cy->acq_s = wd_lock_all(&w, args);
    size_t heap1 = wd_heap();
    int64_t t_last = bench_now_ns();
    wd_memory_report(&w, (double)(heap1 - heap0) / cy->n);
    rlk_wd_get_stats(cl->watchdog, &cy->st0);
    int ok = (t_last - t_sac) / 1000000 < cy->lease / 3 - 500 && cy->st0.renewed == 0;
    if (ok) {
        wd_measure_sweeps(ctl, cl->watchdog, &w, sac, t_last, cy);
    } else {
        printf("%-22s skipped: taking %d holds took %.1f s, not below the renewal period of "
               "%lld ms\n",
               "watchdog_100k_holds", cy->n, cy->acq_s, (long long)(cy->lease / 3));
        rlock_unlock(sac);
    }
    rlk_wd_get_stats(cl->watchdog, &cy->st1);
    int held = wd_count_held(ctl, &w);
    int unlock_err = wd_unlock_free(&w);
    int lost = (int)(cy->st1.lost - cy->st0.lost) + (cy->n - held) + unlock_err;
    if (ok) {
        wd_sweep_report(cy, lost);
    }
    free(cy);
    rlock_free(sac);
    rlock_client_free(cl);
    redisFree(ctl);
    return ok ? 0 : -1;
}
