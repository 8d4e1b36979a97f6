/*
 * Scenarios 1 and 2: uncontended lock+unlock pairs.
 *
 * Ideal: raw hiredis sends rlock's scripts with Redisson's keys only, the least an uncontended
 * pair of rlock_lock(l, 30000) + rlock_unlock(l) can send:
 *   EVALSHA <lock_acquire> 2 <name> redisson_lock_token:{<name>} 30000 <owner>
 *   EVALSHA <lock_release> 2 <name> redisson_lock__channel:{<name>} 30000 <owner> 0
 * on a dedicated connection per thread (argv form, as the library uses). rlock does the same
 * work through the public API on one client shared by all threads (its scripts also get the
 * waiters' keys). A third kind of block sends Redisson 4.7.0's own acquire and unlock scripts
 * (and the unlock latch's DEL), for Redis' time per call of each side (INFO commandstats).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "scripts.h"

#define U_MAX_THREADS 16

typedef bench_uthread u_thread;

/* The kinds of block: rlock, the raw ideal, Redisson's scripts sent raw. */
enum { U_RLOCK = 0, U_RAW = 1, U_REDISSON = 2, U_SIDES = 3 };
enum { U_BLOCKS = 32 }; /* ABBA blocks per repetition */

/* Redisson 4.7.0's RLock scripts (redisson-protocol.md 2.1 and 1.5), as its jar sends them:
 * acquire (KEYS name; ARGV lease, owner) and unlock with its latch (KEYS name, channel, latch;
 * ARGV message, lease, owner, publish command, latch TTL). */
static const char *const u_redisson_acquire =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";
static const char *const u_redisson_unlock =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";
static char g_redisson_sha[2][48];

static void u_redisson_load(redisContext *c)
{
    const char *src[2] = {u_redisson_acquire, u_redisson_unlock};
    for (int i = 0; i < 2; i++) {
        redisReply *r = bench_cmd(c, "SCRIPT LOAD %s", src[i]);
        snprintf(g_redisson_sha[i], sizeof(g_redisson_sha[i]), "%s", r->str);
        freeReplyObject(r);
    }
}

/* Redisson's pair: acquire, unlock with a fresh latch name (a request id per unlock), and the
 * latch's DEL that its client sends after the unlock's reply. */
static int u_redisson_pair(u_thread *t)
{
    static _Atomic unsigned long long next;
    char latch[160], ch[128];
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:%032llx", t->name,
             (unsigned long long)++next);
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", t->name);
    redisReply *r =
        redisCommand(t->conn, "EVALSHA %s 1 %s 30000 %s", g_redisson_sha[0], t->name, t->owner);
    int ok = r != NULL && r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    r = redisCommand(t->conn, "EVALSHA %s 3 %s %s %s 0 30000 %s publish 20000", g_redisson_sha[1],
                     t->name, ch, latch, t->owner);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    r = redisCommand(t->conn, "DEL %s", latch);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
    return ok;
}

static int u_raw_pair(redisContext *c, const char **acq, const size_t *acq_len, const char **rel,
                      const size_t *rel_len)
{
    redisReply *r = redisCommandArgv(c, 7, acq, acq_len);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1;
    freeReplyObject(r);
    r = redisCommandArgv(c, 8, rel, rel_len);
    ok = ok && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok;
}

static void *u_run(void *arg)
{
    u_thread *t = arg;
    char tok[128], ch[128];
    snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", t->name);
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", t->name);
    const char *acq[7] = {"EVALSHA", bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), "2", t->name, tok, "30000",
                          t->owner};
    const char *rel[8] = {
        "EVALSHA", bench_sha(RLK_SCRIPT_LOCK_RELEASE), "2", t->name, ch, "30000", t->owner, "0"};
    size_t acq_len[7], rel_len[8];
    for (int k = 0; k < 7; k++) {
        acq_len[k] = strlen(acq[k]);
    }
    for (int k = 0; k < 8; k++) {
        rel_len[k] = strlen(rel[k]);
    }
    for (int b = 0; b < t->blocks; b++) {
        int raw = t->modes[b];
        pthread_barrier_wait(t->start);
        for (int i = 0; i < t->pairs; i++) {
            int64_t a = bench_now_ns();
            int ok;
            if (raw == U_REDISSON) {
                ok = u_redisson_pair(t);
            } else if (t->pair != NULL) {
                ok = t->pair(t, raw);
            } else if (raw) {
                ok = u_raw_pair(t->conn, acq, acq_len, rel, rel_len);
            } else {
                ok = rlock_lock(t->lock, 30000) == RLOCK_OK && rlock_unlock(t->lock) == RLOCK_OK;
            }
            t->errors += !ok;
            if (raw != U_REDISSON) {
                bench_samples_add(raw ? &t->lat_raw : &t->lat,
                                  (double)(bench_now_ns() - a) / 1000.0);
            }
        }
        pthread_barrier_wait(t->end);
    }
    return NULL;
}

typedef struct u_result {
    double secs[U_SIDES]; /* [rlock, raw, Redisson] wall time summed over blocks */
    double pairs[U_SIDES];
    double cpu[U_SIDES];        /* process CPU seconds (user + sys) summed over blocks */
    double gsecs[16][2];        /* per group of 4 blocks (ABBA): wall time per side */
    bench_cmdstats st[U_SIDES]; /* per-command calls summed over blocks */
    bench_cmdstats bst[U_BLOCKS + U_BLOCKS / 4]; /* each block's own, for Redis' time */
} u_result;

static void u_stats_add(bench_cmdstats *sum, const bench_cmdstats *s)
{
    for (int i = 0; i < s->n; i++) {
        int k = 0;
        while (k < sum->n && strcmp(sum->name[k], s->name[i]) != 0) {
            k++;
        }
        if (k == sum->n && sum->n < BENCH_MAX_CMDS) {
            snprintf(sum->name[k], sizeof(sum->name[k]), "%s", s->name[i]);
            sum->n++;
        }
        sum->calls[k] += s->calls[i];
        sum->usec[k] += s->usec[i];
    }
}

static double u_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* One repetition: `blocks` blocks of `pairs` pairs per thread, in the order given by modes.
 * All threads run a block in the same mode at the same time, between two barriers, so raw and
 * rlock blocks alternate every few tens of milliseconds and see the same machine load. */
static void u_rep(u_thread *ts, int nthreads, const int *modes, int blocks, int pairs,
                  redisContext *ctl, u_result *res)
{
    int abba = 0; /* ABBA blocks so far: 4 make a group */
    pthread_t th[U_MAX_THREADS];
    pthread_barrier_t start, end;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&end, NULL, (unsigned)nthreads + 1);
    memset(res, 0, sizeof(*res));
    for (int i = 0; i < nthreads; i++) {
        ts[i].pairs = pairs;
        ts[i].start = &start;
        ts[i].end = &end;
        ts[i].modes = modes;
        ts[i].blocks = blocks;
        ts[i].errors = 0;
        pthread_create(&th[i], NULL, u_run, &ts[i]);
    }
    for (int b = 0; b < blocks; b++) {
        if (ctl != NULL) {
            bench_cmd_ok(ctl, "CONFIG RESETSTAT");
        }
        double cpu0 = u_cpu_s();
        pthread_barrier_wait(&start);
        int64_t a = bench_now_ns();
        pthread_barrier_wait(&end);
        res->secs[modes[b]] += (double)(bench_now_ns() - a) / 1e9;
        if (modes[b] != U_REDISSON) {
            res->gsecs[abba++ / 4][modes[b]] += (double)(bench_now_ns() - a) / 1e9;
        }
        res->cpu[modes[b]] += u_cpu_s() - cpu0;
        res->pairs[modes[b]] += (double)pairs * nthreads;
        if (ctl != NULL) {
            bench_cmdstats_get(ctl, &res->bst[b]);
            u_stats_add(&res->st[modes[b]], &res->bst[b]);
        }
    }
    int errors = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        errors += ts[i].errors;
    }
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&end);
    if (errors) {
        bench_die("%d failed lock/unlock pairs (%s)", errors, rlock_last_error());
    }
}

/* Everything measured in one scenario, per repetition where it is an array. */
typedef struct u_sum {
    int reps;
    double pairs; /* pairs per side and repetition */
    double ideal[64], rl[64], cmds[64], cpu_i[64], cpu_r[64];
    double gratio[64 * 8]; /* per ABBA group: rlock rate / raw rate */
    size_t ng;
    bench_samples lat_i, lat_r;
    int redisson; /* Redisson's blocks run too (u_scenario) */
    /* Redis' time (INFO commandstats) per EVALSHA and per pair, per side and block: medians of
     * blocks, since a block in which Redis was preempted counts the wait as command time. */
    bench_samples usec_call[U_SIDES], usec_pair[U_SIDES];
} u_sum;

/* ABBA BAAB ... : a block of each side in every pair of consecutive blocks; with redisson, a
 * block of Redisson's scripts after each group of four. Returns the number of blocks. */
static int u_modes(int *modes, int redisson)
{
    int n = 0;
    for (int b = 0; b < U_BLOCKS; b++) {
        modes[n++] = (b % 4 == 0 || b % 4 == 3) ^ (b / 4 % 2);
        if (redisson && b % 4 == 3) {
            modes[n++] = U_REDISSON;
        }
    }
    return n;
}

/* Redis' time per EVALSHA and per pair of each block of one repetition (modes: each block's
 * side; pairs: of a block, all threads). Redisson's pair also costs its client's DEL of the
 * unlock latch: the DEL calls beyond the unlock script's own one per pair, at a DEL's mean time. */
static void u_redis_time(u_sum *s, const u_result *res, const int *modes, int blocks, double pairs)
{
    for (int b = 0; b < blocks; b++) {
        const bench_cmdstats *st = &res->bst[b];
        double ev = (double)bench_cmdstats_usec(st, "evalsha");
        double calls = (double)bench_cmdstats_calls(st, "evalsha");
        double dels = (double)bench_cmdstats_calls(st, "del");
        double extra = modes[b] == U_REDISSON && dels > pairs
                           ? (double)bench_cmdstats_usec(st, "del") / dels * (dels - pairs)
                           : 0;
        if (calls > 0) {
            bench_samples_add(&s->usec_call[modes[b]], ev / calls);
            bench_samples_add(&s->usec_pair[modes[b]], (ev + extra) / pairs);
        }
    }
}

/* Warm-up, then the repetitions; fills s. */
static void u_measure(u_thread *ts, int nthreads, int pairs, redisContext *ctl, u_sum *s)
{
    int modes[U_BLOCKS + U_BLOCKS / 4];
    int blocks = u_modes(modes, s->redisson);
    int per_block = pairs / U_BLOCKS + 1;
    /* Warm-up: dials the pool's connections and the raw ones, faults in code and memory. */
    u_result res;
    u_rep(ts, nthreads, modes, 2, per_block, NULL, &res);
    for (int i = 0; i < nthreads; i++) {
        bench_samples_free(&ts[i].lat);
        bench_samples_free(&ts[i].lat_raw);
    }
    s->reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    for (int rep = 0; rep < s->reps; rep++) {
        u_rep(ts, nthreads, modes, blocks, per_block, ctl, &res);
        s->pairs = res.pairs[0];
        s->ideal[rep] = res.pairs[1] / res.secs[1];
        s->rl[rep] = res.pairs[0] / res.secs[0];
        /* Each ABBA group holds the same number of pairs per side: its ratio of rates is the
         * inverse ratio of its wall times. */
        for (int g = 0; g < U_BLOCKS / 4; g++) {
            s->gratio[s->ng++] = res.gsecs[g][1] / res.gsecs[g][0];
        }
        s->cpu_i[rep] = res.cpu[1] / res.pairs[1] * 1e6;
        s->cpu_r[rep] = res.cpu[0] / res.pairs[0] * 1e6;
        /* The ideal sends exactly 2 commands per pair. rlock's EVALSHA count, plus every
         * difference between the two sides' per-command counts (Redis counts the commands
         * scripts run too, the same for the same scripts), is what rlock sent per pair. */
        s->cmds[rep] = ((double)bench_cmdstats_calls(&res.st[0], "evalsha") +
                        (double)bench_cmdstats_diff(&res.st[0], &res.st[1], "evalsha")) /
                       res.pairs[0];
        if (ctl != NULL) {
            u_redis_time(s, &res, modes, blocks, (double)per_block * nthreads);
        }
    }
    for (int i = 0; i < nthreads; i++) {
        for (size_t k = 0; k < ts[i].lat.n; k++) {
            bench_samples_add(&s->lat_r, ts[i].lat.v[k]);
        }
        for (size_t k = 0; k < ts[i].lat_raw.n; k++) {
            bench_samples_add(&s->lat_i, ts[i].lat_raw.v[k]);
        }
        bench_samples_free(&ts[i].lat);
        bench_samples_free(&ts[i].lat_raw);
    }
}

/* Redis' time per EVALSHA and per pair: Redisson's scripts (in the ideal's column) against
 * rlock's, medians over blocks; the target is on the time per call. Returns the ratio. */
static double u_report_redis(const char *scen, u_sum *s)
{
    double call[U_SIDES], pair[U_SIDES];
    for (int k = 0; k < U_SIDES; k++) {
        call[k] = bench_pct(&s->usec_call[k], 50);
        pair[k] = bench_pct(&s->usec_pair[k], 50);
    }
    double ratio = call[U_RLOCK] / call[U_REDISSON];
    bench_row(scen, "redis us per EVALSHA vs Redisson", call[U_REDISSON], call[U_RLOCK],
              "<= 1.15x Redisson's", ratio <= 1.15);
    bench_row(scen, "redis us per pair vs Redisson", pair[U_REDISSON], pair[U_RLOCK], NULL, -1);
    bench_row(scen, "redis us per pair vs ideal", pair[U_RAW], pair[U_RLOCK], NULL, -1);
    bench_json j;
    bench_json_begin(&j, scen);
    bench_json_str(&j, "part", "redis_time");
    BENCH_JSON_NUMS(&j, {"redisson_us_per_evalsha", call[U_REDISSON]},
                    {"rlock_us_per_evalsha", call[U_RLOCK]}, {"ideal_us_per_evalsha", call[U_RAW]},
                    {"redisson_us_per_pair", pair[U_REDISSON]},
                    {"rlock_us_per_pair", pair[U_RLOCK]}, {"ideal_us_per_pair", pair[U_RAW]},
                    {"ratio_per_evalsha", ratio}, {"target_ratio", 1.15});
    bench_json_bool(&j, "pass", ratio <= 1.15);
    bench_json_end(&j);
    return ratio;
}

/* The "redis commands per pair" row only when counted (cmds: a control connection was given). */
static void u_report(const char *scen, int nthreads, double target, int cmds, u_sum *s)
{
    size_t reps = (size_t)s->reps;
    double mi = bench_median(s->ideal, reps), mr = bench_median(s->rl, reps);
    double ratio = bench_median(s->gratio, s->ng), cmax = 0;
    for (size_t i = 0; i < reps; i++) {
        cmax = s->cmds[i] > cmax ? s->cmds[i] : cmax;
    }
    double i50 = bench_pct(&s->lat_i, 50), i99 = bench_pct(&s->lat_i, 99);
    double r50 = bench_pct(&s->lat_r, 50), r99 = bench_pct(&s->lat_r, 99);
    double ci = bench_median(s->cpu_i, reps), cr = bench_median(s->cpu_r, reps);
    char tgt[32];
    snprintf(tgt, sizeof(tgt), "ratio >= %.2f", target);
    bench_row_ratio(scen, "pairs/s (ratio: paired blocks)", mi, mr, ratio, tgt, ratio >= target);
    bench_row(scen, "pair latency p50 (us)", i50, r50, NULL, -1);
    bench_row(scen, "pair latency p99 (us)", i99, r99, NULL, -1);
    bench_row(scen, "client CPU per pair (us)", ci, cr, NULL, -1);
    if (cmds) {
        bench_row(scen, "redis commands per pair", 2.0, cmax, "== 2 (every rep)", cmax == 2.0);
    } else {
        cmax = 2.0; /* not counted: judged by the ratio alone */
    }
    bench_json j;
    bench_json_begin(&j, scen);
    BENCH_JSON_NUMS(&j, {"threads", nthreads}, {"reps", s->reps}, {"pairs_per_rep_each", s->pairs},
                    {"ideal_pairs_per_s", mi}, {"rlock_pairs_per_s", mr}, {"ratio", ratio},
                    {"ratio_of_medians", mr / mi}, {"ideal_p50_us", i50}, {"ideal_p99_us", i99},
                    {"rlock_p50_us", r50}, {"rlock_p99_us", r99},
                    {"ideal_client_cpu_us_per_pair", ci}, {"rlock_client_cpu_us_per_pair", cr},
                    {"rlock_cmds_per_pair_median", bench_median(s->cmds, reps)},
                    {"rlock_cmds_per_pair_max", cmax}, {"target_ratio", target});
    bench_json_bool(&j, "pass", ratio >= target && cmax == 2.0);
    bench_json_end(&j);
    if (cmds && s->redisson) {
        u_report_redis(scen, s);
    }
}

/* bench_uncontended_run() with Redisson's blocks too when redisson (ctl must be given then). */
static void u_run_all(const char *scen, bench_uthread *ts, int nthreads, int pairs,
                      redisContext *ctl, double target, int redisson)
{
    u_sum *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        bench_die("out of memory");
    }
    s->redisson = redisson && ctl != NULL;
    u_measure(ts, nthreads, pairs, ctl, s);
    u_report(scen, nthreads, target, ctl != NULL, s);
    bench_samples_free(&s->lat_i);
    bench_samples_free(&s->lat_r);
    for (int k = 0; k < U_SIDES; k++) {
        bench_samples_free(&s->usec_call[k]);
        bench_samples_free(&s->usec_pair[k]);
    }
    free(s);
}

void bench_uncontended_run(const char *scen, bench_uthread *ts, int nthreads, int pairs,
                           redisContext *ctl, double target)
{
    u_run_all(scen, ts, nthreads, pairs, ctl, target, 0);
}

static void u_scenario(const char *scen, int nthreads, int pairs, double target)
{
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    u_redisson_load(ctl);
    rlock_client *cl = bench_client(0, 0, 0);
    u_thread ts[U_MAX_THREADS];
    memset(ts, 0, sizeof(ts));
    for (int i = 0; i < nthreads; i++) {
        snprintf(ts[i].name, sizeof(ts[i].name), "bench:%s:%d", scen, i);
        /* Same shape and length as rlock's "<uuid>:<thread-id>". */
        snprintf(ts[i].owner, sizeof(ts[i].owner), "0b7e6a52-3f0c-4d8e-9a51-6c2f1e8d4b%02d:%d", i,
                 i + 1);
        ts[i].conn = bench_raw(0);
        ts[i].lock = rlock_open(cl, RLOCK_REENTRANT, ts[i].name);
        if (ts[i].lock == NULL) {
            bench_die("rlock_open: %s", rlock_last_error());
        }
    }
    u_run_all(scen, ts, nthreads, pairs, ctl, target, 1);
    for (int i = 0; i < nthreads; i++) {
        rlock_free(ts[i].lock);
        redisFree(ts[i].conn);
    }
    rlock_client_free(cl);
    redisFree(ctl);
}

int bench_uncontended_1(void)
{
    u_scenario("uncontended_1t", 1, (int)(3000 * g_cfg.scale) + 10, 0.95);
    return 0;
}

int bench_uncontended_8(void)
{
    u_scenario("uncontended_8t", 8, (int)(1500 * g_cfg.scale) + 10, 0.93);
    return 0;
}
