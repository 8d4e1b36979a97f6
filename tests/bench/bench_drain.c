/*
 * Scenario "drain" (issue 18): how fast a crowd of waiters is served. A holder takes the lock, N
 * waiters (N = 8, 16, 64) arrive within 100 ms (waiter i calls lock at i * 100 ms / N), each in a
 * process of its own with a client of its own, as separate services are; once all of them wait,
 * the holder releases, and each waiter that gets the lock releases it at once and exits. The
 * drain rate is N / (time from the holder's release to the last waiter's release), in
 * acquisitions per second.
 *
 * Ideal, per lock type, measured in the same run and interleaved with rlock (the order alternates
 * per repetition): raw hiredis waiters speaking Redisson's protocol by hand, a command and a
 * subscriber connection each:
 *  - reentrant: lock_acquire / lock_release with Redisson's keys only (no waiters zset), every
 *    waiter subscribed to redisson_lock__channel:{name}: a release's "0" wakes every waiter
 *    (each is its own client), all attempt, one wins: Redisson's wake-all;
 *  - fair: the fair scripts with a channel per waiter (redisson_lock__channel:{name}:<owner>),
 *    as Redisson's RedissonFairLock: a release wakes the head of the queue only;
 *  - write: rw_write_acquire without queueing (ARGV[4] = 0) and rw_write_release, every waiter
 *    subscribed to redisson_rwlock:{name}, whose "1" wakes them all: Redisson's write lock.
 * Plus one rlock client shared by 64 threads of one process (the reentrant lock), against the
 * reentrant ideal with 64 processes of the same repetition.
 * The ratio printed is the median over repetitions of rlock / ideal of the same repetition.
 * drain_sync runs the same on a master with 2 replicas (replica_sync on, rlock's default): the
 * ideal sends WAIT 2 1000 pipelined behind each of its scripts, and the WAIT round is printed.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "scripts.h"

#define D_MAX        64
#define D_ARRIVAL_US 100000
#define D_KINDS      3
#define D_SIZES      3
#define D_MAX_REPS   32

static const int d_sizes[D_SIZES] = {8, 16, 64};
static const char *const d_kind_names[D_KINDS] = {"reentrant", "fair", "write"};
static const rlock_kind d_kinds[D_KINDS] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_WRITE};

typedef struct d_shm {
    atomic_int ready;    /* waiters set up (connected, subscribed) */
    atomic_int arrived;  /* waiters that called lock */
    atomic_int released; /* waiters that released */
    atomic_int errors;
    int64_t start_ns; /* arrivals are spread from here */
    int64_t released_ns[D_MAX];
} d_shm;

/* One waiter: its mode, and its connections (raw) or its lock handle (rlock). */
typedef struct d_waiter {
    d_shm *shm;
    int go_fd, done_fd; /* read ends of pipes whose writer closes them: the start and the end */
    int idx, n, kind, raw;
    const char *name;
    rlock *lock;
    redisContext *cmd, *sub;
    char owner[64];
} d_waiter;

static redisReply *d_raw_acquire_call(d_waiter *w)
{
    const char *n = w->name;
    if (w->kind == 1) {
        return bench_eval(w->cmd,
                          "EVALSHA %s 5 %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s} "
                          "redisson_lock_token:{%s} redisson_lock__channel:{%s} 30000 %s 5000 1",
                          bench_sha(RLK_SCRIPT_FAIR_ACQUIRE), n, n, n, n, n, w->owner);
    }
    if (w->kind == 2) {
        return bench_eval(w->cmd,
                          "EVALSHA %s 3 %s redisson_lock_token:{%s} rlock_rwlock_writers:{%s} "
                          "30000 %s:write %s 0",
                          bench_sha(RLK_SCRIPT_RW_WRITE_ACQUIRE), n, n, n, w->owner, w->owner);
    }
    return bench_eval(w->cmd, "EVALSHA %s 2 %s redisson_lock_token:{%s} 30000 %s",
                      bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), n, n, w->owner);
}

static void d_raw_lock(d_waiter *w)
{
    for (;;) {
        redisReply *r = d_raw_acquire_call(w);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
            bench_die("drain: raw acquire failed (type %d, %zu elements): %s", r ? r->type : -1,
                      r ? r->elements : 0,
                      r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : w->cmd->errstr);
        }
        int ok = r->element[0]->integer == 1;
        long long bound = r->element[1]->integer;
        freeReplyObject(r);
        if (ok) {
            return;
        }
        bench_sub_read(w->sub, bound > 0 ? (int)bound : 1);
    }
}

static void d_raw_unlock(d_waiter *w)
{
    const char *n = w->name;
    redisReply *r;
    if (w->kind == 1) {
        r = bench_eval(w->cmd,
                       "EVALSHA %s 4 %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s} "
                       "redisson_lock__channel:{%s} 30000 %s 0",
                       bench_sha(RLK_SCRIPT_FAIR_RELEASE), n, n, n, n, w->owner);
    } else if (w->kind == 2) {
        r = bench_eval(w->cmd,
                       "EVALSHA %s 5 %s redisson_rwlock:{%s} {%s}:%s:rwlock_timeout "
                       "rlock_rwlock_writers:{%s} rlock_rwlock_writer:{%s} %s:write %s",
                       bench_sha(RLK_SCRIPT_RW_WRITE_RELEASE), n, n, n, w->owner, n, n, w->owner,
                       w->owner);
    } else {
        r = bench_eval(w->cmd, "EVALSHA %s 2 %s redisson_lock__channel:{%s} 30000 %s 0",
                       bench_sha(RLK_SCRIPT_LOCK_RELEASE), n, n, w->owner);
    }
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        bench_die("drain: raw release failed");
    }
    freeReplyObject(r);
}

/* Connects a raw waiter and subscribes it where Redisson's waiter of its kind listens. */
static void d_raw_open(d_waiter *w)
{
    snprintf(w->owner, sizeof(w->owner), "7c2d9e4f-1a3b-4c5d-8e6f-0a1b2c3d4e%02d:%d", w->idx,
             w->idx + 1);
    w->cmd = bench_raw(0);
    w->sub = bench_raw(0);
    redisReply *r =
        w->kind == 1
            ? bench_cmd(w->sub, "SUBSCRIBE redisson_lock__channel:{%s}:%s", w->name, w->owner)
        : w->kind == 2 ? bench_cmd(w->sub, "SUBSCRIBE redisson_rwlock:{%s}", w->name)
                       : bench_cmd(w->sub, "SUBSCRIBE redisson_lock__channel:{%s}", w->name);
    freeReplyObject(r);
}

/* Blocks until the write end of fd's pipe is closed everywhere. Waiters block instead of
 * polling shared memory, which would steal the CPUs the drain is measured on. */
static void d_block(int fd)
{
    char b;
    while (read(fd, &b, 1) > 0) {
    }
}

/* A waiter's life once set up: wait for go, arrive at its slot, take the lock, release it, and
 * wait for the end of the drain before its teardown (which would compete for the CPUs too). */
static void *d_waiter_run(void *arg)
{
    d_waiter *w = arg;
    d_shm *s = w->shm;
    atomic_fetch_add(&s->ready, 1);
    d_block(w->go_fd);
    int64_t at = s->start_ns + (int64_t)w->idx * D_ARRIVAL_US * 1000 / w->n;
    int64_t now = bench_now_ns();
    if (at > now) {
        bench_sleep_us((at - now) / 1000);
    }
    atomic_fetch_add(&s->arrived, 1);
    if (w->raw) {
        d_raw_lock(w);
        d_raw_unlock(w);
    } else if (rlock_lock(w->lock, 30000) != RLOCK_OK || rlock_unlock(w->lock) != RLOCK_OK) {
        atomic_fetch_add(&s->errors, 1);
    }
    s->released_ns[w->idx] = bench_now_ns();
    atomic_fetch_add(&s->released, 1);
    d_block(w->done_fd);
    return NULL;
}

/* A waiter in a process of its own. */
static void d_child(d_waiter w)
{
    rlock_client *cl = NULL;
    if (w.raw) {
        d_raw_open(&w);
    } else {
        rlock_options o;
        rlock_options_init(&o);
        o.pool_size = 2;
        cl = bench_client_opts(0, &o);
        w.lock = rlock_open(cl, d_kinds[w.kind], w.name);
        if (w.lock == NULL) {
            bench_die("rlock_open: %s", rlock_last_error());
        }
    }
    d_waiter_run(&w);
    if (w.raw) {
        redisFree(w.cmd);
        redisFree(w.sub);
    }
    rlock_free(w.lock);
    rlock_client_free(cl);
}

/* The holder (raw or rlock, as the waiters): takes the lock before they arrive. */
typedef struct d_holder {
    d_waiter w;
    rlock_client *cl;
} d_holder;

static void d_holder_lock(d_holder *h, int kind, int raw, const char *name)
{
    memset(h, 0, sizeof(*h));
    h->w = (d_waiter){.idx = D_MAX, .kind = kind, .raw = raw, .name = name};
    if (raw) {
        d_raw_open(&h->w);
        d_raw_lock(&h->w);
        return;
    }
    h->cl = bench_client(0, 0, 0);
    h->w.lock = rlock_open(h->cl, d_kinds[kind], name);
    if (h->w.lock == NULL || rlock_lock(h->w.lock, 30000) != RLOCK_OK) {
        bench_die("drain: the holder cannot lock: %s", rlock_last_error());
    }
}

/* Releases once every waiter waits; returns when the release returned (ns). */
static int64_t d_holder_release(d_holder *h, d_shm *s, int n)
{
    while (atomic_load(&s->arrived) < n) {
        bench_sleep_us(1000);
    }
    bench_sleep_us(50000); /* the last arrival's attempt, SUBSCRIBE and re-attempt are over */
    if (h->w.raw) {
        d_raw_unlock(&h->w);
    } else if (rlock_unlock(h->w.lock) != RLOCK_OK) {
        bench_die("drain: the holder cannot unlock");
    }
    int64_t t0 = bench_now_ns();
    if (h->w.raw) {
        redisFree(h->w.cmd);
        redisFree(h->w.sub);
    }
    rlock_free(h->w.lock);
    rlock_client_free(h->cl);
    return t0;
}

/* Acquisitions per second from the release t0 to the last waiter's release. */
static double d_rate(const d_shm *s, int n, int64_t t0)
{
    int64_t last = t0;
    for (int i = 0; i < n; i++) {
        last = s->released_ns[i] > last ? s->released_ns[i] : last;
    }
    return (double)n * 1e9 / (double)(last - t0);
}

/* The start and end pipes of one run. */
typedef struct d_pipes {
    int go[2], done[2];
} d_pipes;

static void d_pipes_open(d_pipes *p)
{
    if (pipe(p->go) != 0 || pipe(p->done) != 0) {
        bench_die("pipe failed");
    }
}

/* The holder's part of a run once the waiters are set up: take the lock, start the arrivals,
 * release when all wait, wait until all released, end the run. Returns the release time. */
static int64_t d_hold_and_release(d_shm *s, d_pipes *p, int kind, int raw, int n, const char *name)
{
    while (atomic_load(&s->ready) < n) {
        bench_sleep_us(1000); /* a waiter that cannot set up dies, and so does the bench */
    }
    d_holder h;
    d_holder_lock(&h, kind, raw, name);
    s->start_ns = bench_now_ns();
    close(p->go[1]);
    int64_t t0 = d_holder_release(&h, s, n);
    int64_t limit = bench_now_ns() + 60 * 1000000000LL;
    while (atomic_load(&s->released) < n && atomic_load(&s->errors) == 0) {
        if (bench_now_ns() > limit) {
            bench_die("drain: %d of %d waiters released within 60 s", atomic_load(&s->released), n);
        }
        bench_sleep_us(1000);
    }
    close(p->done[1]);
    return t0;
}

/* One drain of n waiters in processes of their own. */
static double d_once_procs(d_shm *s, int kind, int raw, int n, const char *name)
{
    memset(s, 0, sizeof(*s));
    d_pipes p;
    d_pipes_open(&p);
    fflush(stdout);
    pid_t pids[D_MAX];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            bench_die("fork failed");
        }
        if (pids[i] == 0) {
            close(p.go[1]);
            close(p.done[1]);
            d_child((d_waiter){.shm = s,
                               .go_fd = p.go[0],
                               .done_fd = p.done[0],
                               .idx = i,
                               .n = n,
                               .kind = kind,
                               .raw = raw,
                               .name = name});
            _exit(0);
        }
    }
    int64_t t0 = d_hold_and_release(s, &p, kind, raw, n, name);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    close(p.go[0]);
    close(p.done[0]);
    if (failed != 0 || atomic_load(&s->errors) != 0) {
        bench_die("drain run failed (%d processes, %d errors)", failed, atomic_load(&s->errors));
    }
    return d_rate(s, n, t0);
}

/* One drain of n threads sharing one rlock client (reentrant lock). */
static double d_once_shared(d_shm *s, int n, const char *name)
{
    memset(s, 0, sizeof(*s));
    d_pipes p;
    d_pipes_open(&p);
    rlock_client *cl = bench_client(0, 0, 0);
    rlock *l = rlock_open(cl, RLOCK_REENTRANT, name);
    d_waiter w[D_MAX];
    pthread_t th[D_MAX];
    for (int i = 0; i < n; i++) {
        w[i] = (d_waiter){.shm = s,
                          .go_fd = p.go[0],
                          .done_fd = p.done[0],
                          .idx = i,
                          .n = n,
                          .name = name,
                          .lock = l};
        pthread_create(&th[i], NULL, d_waiter_run, &w[i]);
    }
    int64_t t0 = d_hold_and_release(s, &p, 0, 0, n, name);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    close(p.go[0]);
    close(p.done[0]);
    rlock_free(l);
    rlock_client_free(cl);
    if (atomic_load(&s->errors) != 0) {
        bench_die("shared-client drain failed (%d errors)", atomic_load(&s->errors));
    }
    return d_rate(s, n, t0);
}

/* Rates [kind][size][rep] of both sides, and the shared client's [rep]. */
typedef struct d_results {
    double ideal[D_KINDS][D_SIZES][D_MAX_REPS];
    double rlock[D_KINDS][D_SIZES][D_MAX_REPS];
    double shared[D_MAX_REPS];
} d_results;

static void d_rep(d_shm *s, d_results *res, int rep)
{
    char name[64];
    for (int k = 0; k < D_KINDS; k++) {
        for (int z = 0; z < D_SIZES; z++) {
            int n = d_sizes[z];
            /* The order alternates so that drift of the machine weighs on both sides alike. */
            for (int side = 0; side < 2; side++) {
                int raw = (side + rep) % 2 == 0;
                snprintf(name, sizeof(name), "bench:drain:%s:%d:%d:%s", d_kind_names[k], n, rep,
                         raw ? "raw" : "rlock");
                double rate = d_once_procs(s, k, raw, n, name);
                *(raw ? &res->ideal[k][z][rep] : &res->rlock[k][z][rep]) = rate;
            }
        }
    }
    snprintf(name, sizeof(name), "bench:drain:shared:%d", rep);
    res->shared[rep] = d_once_shared(s, D_MAX, name);
}

static void d_report_row(const char *scen, const char *metric, double *ideal, double *rl, int reps,
                         double target, bench_json *j, const char *key)
{
    double ratios[D_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        ratios[r] = rl[r] / ideal[r];
    }
    double ratio = bench_median(ratios, (size_t)reps);
    char tgt[32] = "";
    if (target > 0) {
        snprintf(tgt, sizeof(tgt), "ratio >= %.2f", target);
    }
    bench_row_ratio(scen, metric, bench_median(ideal, (size_t)reps), bench_median(rl, (size_t)reps),
                    ratio, target > 0 ? tgt : NULL, target > 0 ? ratio >= target : -1);
    char k[64];
    snprintf(k, sizeof(k), "%s_ideal_per_s", key);
    bench_json_num(j, k, bench_median(ideal, (size_t)reps));
    snprintf(k, sizeof(k), "%s_rlock_per_s", key);
    bench_json_num(j, k, bench_median(rl, (size_t)reps));
    snprintf(k, sizeof(k), "%s_ratio", key);
    bench_json_num(j, k, ratio);
}

int bench_drain(void)
{
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    redisFree(ctl);
    d_shm *s = mmap(NULL, sizeof(d_shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    d_results *res = calloc(1, sizeof(*res));
    if (s == MAP_FAILED || res == NULL) {
        bench_die("drain: out of memory");
    }
    int reps = g_cfg.reps > D_MAX_REPS ? D_MAX_REPS : g_cfg.reps;
    int sync = g_cfg.sync_n > 0;
    const char *scen = sync ? "drain_sync" : "drain";
    double wround[D_MAX_REPS];
    for (int rep = 0; rep < reps; rep++) {
        wround[rep] = sync ? bench_wait_round_us() : 0;
        d_rep(s, res, rep);
    }
    munmap(s, sizeof(d_shm));
    bench_json j;
    bench_json_begin(&j, scen);
    bench_json_num(&j, "reps", reps);
    if (sync) {
        double mwait = bench_median(wround, (size_t)reps);
        bench_row(scen, "WAIT round p50 (us)", mwait, mwait, NULL, -1);
        bench_json_num(&j, "wait_round_p50_us", mwait);
    }
    bench_json_num(&j, "arrival_window_us", D_ARRIVAL_US);
    char metric[64], key[32];
    for (int k = 0; k < D_KINDS; k++) {
        for (int z = 0; z < D_SIZES; z++) {
            snprintf(metric, sizeof(metric), "%s, %d waiters (acq/s)", d_kind_names[k], d_sizes[z]);
            snprintf(key, sizeof(key), "%s_%d", d_kind_names[k], d_sizes[z]);
            d_report_row(scen, metric, res->ideal[k][z], res->rlock[k][z], reps, k == 1 ? 0 : 0.95,
                         &j, key);
        }
    }
    d_report_row(scen, "1 client x 64 threads (acq/s)", res->ideal[0][D_SIZES - 1], res->shared,
                 reps, 0, &j, "shared_64");
    bench_json_end(&j);
    free(res);
    return 0;
}
