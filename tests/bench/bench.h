/*
 * rlock_bench: shared helpers of the benchmark program (tests/bench). Every scenario measures,
 * in the same run, the ideal (raw hiredis sending the very same EVALSHA calls on dedicated
 * connections) and rlock doing the same work, and reports medians over repetitions.
 */
#ifndef RLOCK_BENCH_H
#define RLOCK_BENCH_H

#include <hiredis.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rlock.h"

#define BENCH_MAX_SERVERS 3

typedef struct bench_cfg {
    int ports[BENCH_MAX_SERVERS]; /* ports[0] is the main server; 1, 2 for RedLock */
    int nports;
    int reps;           /* repetitions per scenario (medians over them) */
    double scale;       /* < 1 shortens every scenario (smoke runs) */
    int tls_port;       /* a TLS port of ports[0]'s server (u1_tls), 0 = none */
    const char *tls_ca; /* the CA that signed its certificate */
    int sync_port;      /* a master with 2 replicas online (u1_sync), 0 = none */
    /* > 0 while a *_sync scenario runs (bench_on_sync_master): server 0 is then the master of
     * sync_port, and the ideal sends WAIT sync_n 1000 behind each script (bench_eval). */
    int sync_n;
} bench_cfg;

extern bench_cfg g_cfg;

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC: comparable across processes). */
int64_t bench_now_ns(void);
void bench_sleep_us(int64_t us);

/* Dies with a message: the bench has no way to go on after its own setup failed. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A raw hiredis connection to ports[idx], or death. */
redisContext *bench_raw(int idx);
/* Runs a command (printf-style, hiredis format) and dies on a connection error or error reply. */
redisReply *bench_cmd(redisContext *c, const char *fmt, ...);
void bench_cmd_ok(redisContext *c, const char *fmt, ...);
/* Reads one reply (a pub/sub message) of subscriber connection c that is already buffered or
 * arrives within timeout_ms (< 0: no limit); 1 if one was consumed, 0 on timeout; dies on a
 * connection error. */
int bench_sub_read(redisContext *c, int timeout_ms);
/* The ideal's script call (printf-style, hiredis format): EVALSHA, with WAIT g_cfg.sync_n 1000
 * pipelined behind it in a *_sync scenario (both written before either reply is read, as rlock
 * sends them); returns the script's reply, NULL on a connection error; dies when the replicas
 * did not all acknowledge. */
redisReply *bench_eval(redisContext *c, const char *fmt, ...);
/* Runs scenario fn with server 0 replaced by the master with 2 replicas (g_cfg.sync_port) and
 * g_cfg.sync_n = 2; -1 (skipped) without --sync-port. */
int bench_on_sync_master(int (*fn)(void), const char *scen);
/* The WAIT round on server 0, p50 in us: a write with WAIT g_cfg.sync_n pipelined behind it,
 * minus the same write alone, one pair at a time 1 ms apart (as the PING RTT is measured). */
double bench_wait_round_us(void);
/* Loads every embedded script on the server (so EVALSHA never sees NOSCRIPT in measured runs). */
void bench_load_scripts(redisContext *c);
/* SHA1 of an embedded script (RLK_SCRIPT_*). */
const char *bench_sha(int script);

/* A client of server idx with default options, except watchdog_timeout_ms and
 * command_timeout_ms when > 0. */
rlock_client *bench_client(int idx, int64_t watchdog_ms, int64_t command_timeout_ms);
/* The same with the caller's options (url is filled in). */
rlock_client *bench_client_opts(int idx, rlock_options *o);

/* INFO commandstats: calls per command. Commands that scripts run (redis.call) are counted
 * too, so "commands sent by the client" is judged by comparing two runs of the same work
 * (bench_cmdstats_extra). The measuring connection's INFO and CONFIG RESETSTAT are left out. */
#define BENCH_MAX_CMDS 64
typedef struct bench_cmdstats {
    int n;
    char name[BENCH_MAX_CMDS][48];
    uint64_t calls[BENCH_MAX_CMDS];
    uint64_t usec[BENCH_MAX_CMDS];
} bench_cmdstats;
void bench_cmdstats_get(redisContext *c, bench_cmdstats *out);
uint64_t bench_cmdstats_calls(const bench_cmdstats *s, const char *name);
uint64_t bench_cmdstats_usec(const bench_cmdstats *s, const char *name);
/* Sum over commands of |a - b| calls, leaving out `skip` (may be NULL). */
uint64_t bench_cmdstats_diff(const bench_cmdstats *a, const bench_cmdstats *b, const char *skip);

/* Samples: a growable array of doubles. */
typedef struct bench_samples {
    double *v;
    size_t n, cap;
} bench_samples;
void bench_samples_add(bench_samples *s, double x);
void bench_samples_free(bench_samples *s);
/* Percentile p (0..100) by nearest rank; sorts s->v in place. NAN when empty. */
double bench_pct(bench_samples *s, double p);
double bench_median(const double *v, size_t n);

/* Output. A table row per metric and one JSON line per scenario, built incrementally. */
void bench_table_header(void);
/* ideal/rlock may be NAN when not applicable; ratio printed is rlock/ideal. */
void bench_row(const char *scenario, const char *metric, double ideal, double rlock,
               const char *target, int pass);
/* Same with the ratio given (e.g. a median of paired ratios) instead of rlock/ideal. */
void bench_row_ratio(const char *scenario, const char *metric, double ideal, double rlock,
                     double ratio, const char *target, int pass);
typedef struct bench_json {
    char buf[4096];
    size_t len;
} bench_json;
void bench_json_begin(bench_json *j, const char *scenario);
void bench_json_num(bench_json *j, const char *key, double v);
/* A run of numeric fields, written in order: BENCH_JSON_NUMS(&j, {"key", value}, ...). */
typedef struct bench_num {
    const char *key;
    double v;
} bench_num;
void bench_json_nums(bench_json *j, const bench_num *nums, size_t n);
#define BENCH_JSON_NUMS(j, ...)                                                                    \
    bench_json_nums((j), (const bench_num[]){__VA_ARGS__},                                         \
                    sizeof((const bench_num[]){__VA_ARGS__}) / sizeof(bench_num))
void bench_json_str(bench_json *j, const char *key, const char *v);
void bench_json_bool(bench_json *j, const char *key, int v);
void bench_json_end(bench_json *j); /* stores the line; printed at the end */
void bench_print_json_lines(void);

/* The two EVALSHA calls rlock sends for rlock_lock(l, 30000) + rlock_unlock(l) of lock `name`
 * by `owner` (both must outlive the struct's use), argv form, for an ideal client to send. */
typedef struct bench_pair_cmds {
    char tok[128], ch[128];
    const char *acq[7];
    size_t acq_len[7];
    const char *rel[8];
    size_t rel_len[8];
} bench_pair_cmds;
void bench_pair_cmds_init(bench_pair_cmds *p, const char *name, const char *owner);

/* Runs pairs lock+unlock pairs on one side: raw 1 calls raw_pair(arg) (1 = the pair succeeded),
 * raw 0 rlock_lock(l, 30000) + rlock_unlock(l); dies naming `what` when a pair fails. Returns
 * the pairs per second. */
double bench_lock_block(int raw, int pairs, rlock *l, int (*raw_pair)(void *arg), void *arg,
                        const char *what);

/* One block of `pairs` pairs on one side (raw 1: the ideal; 0: rlock); returns pairs per second. */
typedef double (*bench_block_fn)(int raw, int pairs, void *arg);
/* g_cfg.reps repetitions of 8 blocks in ABBA order (both sides see the same machine load), then a
 * table row and a JSON line for `scenario`: rlock's rate over the ideal's, median over
 * repetitions, against the target ratio 0.95. */
void bench_abba_1t(const char *scenario, const char *metric, bench_block_fn fn, void *arg,
                   int pairs);

/* A thread of the uncontended scenarios (bench_uncontended.c): pairs of lock+unlock in blocks
 * that alternate between the ideal (raw) and rlock. */
typedef struct bench_uthread bench_uthread;
struct bench_uthread {
    int raw; /* 1 = raw hiredis, 0 = rlock */
    int pairs;
    char name[64];
    char owner[64];
    rlock *lock;        /* rlock mode: this thread's handle */
    redisContext *conn; /* raw mode: this thread's connection */
    /* One pair on the side given (1 = the pair succeeded), when the scenario's pair is not the
     * default one of name on lock / conn; ext is its own state. */
    int (*pair)(bench_uthread *t, int raw);
    void *ext;
    pthread_barrier_t *start, *end; /* around each block, shared with the main thread */
    const int *modes; /* per block: 1 raw, 0 rlock, 2 Redisson's scripts (bench_uncontended.c) */
    int blocks;
    bench_samples lat, lat_raw; /* pair latency in us: rlock, raw */
    int errors;
};
/* Measures nthreads threads (ts filled in up to blocks/modes) for about `pairs` pairs per side,
 * ABBA blocks, g_cfg.reps repetitions, and prints scenario scen's rows and JSON line against
 * the target ratio. ctl: a connection to the one server for INFO commandstats (the "redis
 * commands per pair" row), or NULL where the commands are not counted. */
void bench_uncontended_run(const char *scen, bench_uthread *ts, int nthreads, int pairs,
                           redisContext *ctl, double target);

/* Scenarios. Each returns 0 when it ran (targets met or not), -1 when it could not run. */
int bench_uncontended_1(void);
int bench_uncontended_tls(void);
int bench_sync_1(void);
int bench_uncontended_8(void);
int bench_handoff(rlock_kind kind);
int bench_watchdog_memory(void);
/* Scenario `metrics` (bench_metrics.c): uncontended pairs with metrics on and off. */
int bench_metrics(void);
int bench_fair_queue(void);
int bench_rw(void);
int bench_rw_handoff(void);
int bench_redlock(void);
int bench_semaphore(void);
int bench_drain(void);
int bench_cluster(void);
int bench_redisson(void);
int bench_top(void);
/* Loop clients on libuv (bench_loop_*.c; built when libuv is found: RLOCK_BENCH_LOOP). */
int bench_loop_waits(void);
int bench_loop_handoff(void);
int bench_loop_throughput(void);
/* The redisson scenario's queues (drain of 16, FIFO of 50) against the peer (redisson_java.h). */
struct rj_peer;
void bench_redisson_queues(struct rj_peer *p);

#endif
