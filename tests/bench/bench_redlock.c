/*
 * Scenario 8: RedLock over 3 independent servers: acquire latency against the slowest single
 * server (the members are asked in parallel, so the cost should follow the slowest server, not
 * the sum of the three).
 *
 * rlock: one client per server, a reentrant member handle on each, rlock_redlock_new() over the
 * three; timed: rlock_lock(group, 30000); then rlock_unlock(group) (not timed).
 * Ideal: raw hiredis does what rlock's RedLock does, with no library around it: phase 1 sends
 * lock_acquire (KEYS name, redisson_lock_token:{name}; ARGV 30000, owner) to all three servers
 * before reading any reply; phase 2 sends redlock_raise_token (KEYS redisson_lock_token:{name};
 * ARGV the largest token) to the granting servers, again all before reading; then releases.
 * Serial: the same raw RedLock asking one server after the other (what parallel asking saves).
 * Single server: one raw lock_acquire on one server (one round trip), per server.
 * Blocks of each kind alternate; p50s over all blocks of all repetitions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "scripts.h"

#define RL_N     3
#define RL_OWNER "9c4e2b7a-1f3d-4a6c-8e5b-2d7f0a9c3e41:1"

/* Writes everything hiredis buffered for c (redisGetReply would only flush one connection). */
static void rl_flush(redisContext *c)
{
    int done = 0;
    while (!done) {
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            bench_die("RedLock raw: write: %s", c->errstr);
        }
    }
}

static redisReply *rl_read(redisContext *c)
{
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL || r->type == REDIS_REPLY_ERROR) {
        bench_die("RedLock raw: reply: %s", r ? r->str : c->errstr);
    }
    return r;
}

/* The raw RedLock acquire on all servers; returns its latency in us (release not timed).
 * serial = 1 asks one server after the other (each reply read before the next send): the cost
 * that asking in parallel avoids. */
static double rl_raw_group(redisContext **c, const char *name, int serial)
{
    int64_t a = bench_now_ns();
    long long token = 0;
    for (int i = 0; i < RL_N; i++) {
        redisAppendCommand(c[i], "EVALSHA %s 2 %s redisson_lock_token:{%s} 30000 %s",
                           bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), name, name, RL_OWNER);
        rl_flush(c[i]);
        if (serial) {
            redisReply *r = rl_read(c[i]);
            token = r->element[1]->integer > token ? r->element[1]->integer : token;
            freeReplyObject(r);
        }
    }
    for (int i = 0; i < RL_N && !serial; i++) {
        redisReply *r = rl_read(c[i]);
        if (r->element[0]->integer != 1) {
            bench_die("RedLock raw: not granted");
        }
        token = r->element[1]->integer > token ? r->element[1]->integer : token;
        freeReplyObject(r);
    }
    for (int i = 0; i < RL_N; i++) {
        redisAppendCommand(c[i], "EVALSHA %s 1 redisson_lock_token:{%s} %lld",
                           bench_sha(RLK_SCRIPT_REDLOCK_RAISE_TOKEN), name, token);
        rl_flush(c[i]);
        if (serial) {
            freeReplyObject(rl_read(c[i]));
        }
    }
    for (int i = 0; i < RL_N && !serial; i++) {
        freeReplyObject(rl_read(c[i]));
    }
    double us = (double)(bench_now_ns() - a) / 1000.0;
    for (int i = 0; i < RL_N; i++) {
        redisAppendCommand(c[i], "EVALSHA %s 2 %s redisson_lock__channel:{%s} 30000 %s 0",
                           bench_sha(RLK_SCRIPT_LOCK_RELEASE), name, name, RL_OWNER);
        rl_flush(c[i]);
    }
    for (int i = 0; i < RL_N; i++) {
        freeReplyObject(rl_read(c[i]));
    }
    return us;
}

/* One raw acquire on one server (timed) and its release. */
static double rl_raw_single(redisContext *c, const char *name)
{
    int64_t a = bench_now_ns();
    redisReply *r = redisCommand(c, "EVALSHA %s 2 %s redisson_lock_token:{%s} 30000 %s",
                                 bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), name, name, RL_OWNER);
    double us = (double)(bench_now_ns() - a) / 1000.0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->element[0]->integer != 1) {
        bench_die("single raw acquire failed");
    }
    freeReplyObject(r);
    freeReplyObject(bench_cmd(c, "EVALSHA %s 2 %s redisson_lock__channel:{%s} 30000 %s 0",
                              bench_sha(RLK_SCRIPT_LOCK_RELEASE), name, name, RL_OWNER));
    return us;
}

/* Alternating blocks: rlock's RedLock, the raw RedLock, then each single server. */
static void rl_measure(rlock *g, redisContext **raw, bench_samples *s_rl, bench_samples *s_raw,
                       bench_samples *s_ser, bench_samples *s_one)
{
    int blocks = 4 * g_cfg.reps, per = (int)(100 * g_cfg.scale) + 5;
    for (int b = -1; b < blocks; b++) {
        /* Block -1 warms up (dials every pool); its samples are dropped. */
        for (int k = 0; k < per; k++) {
            int64_t a = bench_now_ns();
            if (rlock_lock(g, 30000) != RLOCK_OK) {
                bench_die("RedLock lock: %s", rlock_last_error());
            }
            double us = (double)(bench_now_ns() - a) / 1000.0;
            if (rlock_unlock(g) != RLOCK_OK) {
                bench_die("RedLock unlock: %s", rlock_last_error());
            }
            if (b >= 0) {
                bench_samples_add(s_rl, us);
            }
        }
        for (int k = 0; k < per; k++) {
            double us = rl_raw_group(raw, "bench:redlock:raw", 0);
            if (b >= 0) {
                bench_samples_add(s_raw, us);
            }
        }
        for (int k = 0; k < per; k++) {
            double us = rl_raw_group(raw, "bench:redlock:raw", 1);
            if (b >= 0) {
                bench_samples_add(s_ser, us);
            }
        }
        for (int i = 0; i < RL_N; i++) {
            for (int k = 0; k < per; k++) {
                double us = rl_raw_single(raw[i], "bench:redlock:one");
                if (b >= 0) {
                    bench_samples_add(&s_one[i], us);
                }
            }
        }
    }
}

int bench_redlock(void)
{
    const char *sc = "redlock_3_servers";
    if (g_cfg.nports < RL_N) {
        printf("%-22s skipped: needs 3 servers (--port 3 times)\n", sc);
        return -1;
    }
    rlock_client *cl[RL_N];
    rlock *m[RL_N];
    redisContext *raw[RL_N];
    for (int i = 0; i < RL_N; i++) {
        cl[i] = bench_client(i, 0, 0);
        m[i] = rlock_open(cl[i], RLOCK_REENTRANT, "bench:redlock:rlock");
        raw[i] = bench_raw(i);
        bench_load_scripts(raw[i]);
    }
    rlock *g = rlock_redlock_new(m, RL_N);
    if (g == NULL) {
        printf("%-22s skipped: %s\n", sc, rlock_last_error());
        for (int i = 0; i < RL_N; i++) {
            rlock_free(m[i]);
            rlock_client_free(cl[i]);
            redisFree(raw[i]);
        }
        return -1;
    }
    bench_samples s_rl = {0}, s_raw = {0}, s_ser = {0}, s_one[RL_N] = {{0}};
    rl_measure(g, raw, &s_rl, &s_raw, &s_ser, s_one);
    double one[RL_N], slowest = 0, sum = 0;
    for (int i = 0; i < RL_N; i++) {
        one[i] = bench_pct(&s_one[i], 50);
        slowest = one[i] > slowest ? one[i] : slowest;
        sum += one[i];
    }
    double rl50 = bench_pct(&s_rl, 50), rl99 = bench_pct(&s_rl, 99);
    double raw50 = bench_pct(&s_raw, 50), raw99 = bench_pct(&s_raw, 99);
    double ser50 = bench_pct(&s_ser, 50);
    /* Judged against the raw parallel RedLock. The serial variant is shown for scale: with three
     * servers and the client sharing 2 vCPUs, the servers cannot really work in parallel here,
     * so asking in parallel saves less than the textbook (n - 1) round trips per round. */
    int pass = rl50 / raw50 <= 1.10;
    bench_row(sc, "acquire p50 (us)", raw50, rl50, "ratio <= 1.10", rl50 / raw50 <= 1.10);
    bench_row(sc, "acquire p99 (us)", raw99, rl99, NULL, -1);
    bench_row(sc, "raw asking serially: p50 (us)", ser50, rl50, NULL, -1);
    bench_row(sc, "acquire p50 / slowest server", raw50 / slowest, rl50 / slowest, NULL, -1);
    printf("%-22s single-server acquire p50 (one round trip, the other servers idle): %.1f / "
           "%.1f / %.1f us; an acquire is 2 rounds (acquire, raise token)\n",
           sc, one[0], one[1], one[2]);
    bench_json j;
    bench_json_begin(&j, sc);
    BENCH_JSON_NUMS(&j, {"acquires", (double)s_rl.n}, {"ideal_acquire_p50_us", raw50},
                    {"ideal_acquire_p99_us", raw99}, {"ideal_serial_acquire_p50_us", ser50},
                    {"rlock_acquire_p50_us", rl50}, {"rlock_acquire_p99_us", rl99},
                    {"ratio_p50", rl50 / raw50}, {"single_p50_us_0", one[0]},
                    {"single_p50_us_1", one[1]}, {"single_p50_us_2", one[2]},
                    {"slowest_single_p50_us", slowest}, {"sum_single_p50_us", sum});
    bench_json_bool(&j, "pass", pass);
    bench_json_end(&j);
    bench_samples_free(&s_ser);
    bench_samples_free(&s_rl);
    bench_samples_free(&s_raw);
    rlock_free(g);
    for (int i = 0; i < RL_N; i++) {
        bench_samples_free(&s_one[i]);
        rlock_free(m[i]);
        rlock_client_free(cl[i]);
        redisFree(raw[i]);
    }
    return 0;
}
