/*
 * Scenario top: one refresh of `rlock top` (rlock_survey(), which is all of its Redis work) on
 * 10,000 matching names among 10,000 that do not match: 7,000 held reentrant locks, 1,000 fair
 * locks with a queue of two, 1,000 semaphores and 1,000 leased semaphores with one lease each,
 * written by raw hiredis in Redisson's layout. The target is a refresh within 1 s; the row gives
 * the median and the slowest of the repetitions. There is no ideal to compare with here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define T_NAMES 10000

/* Queues the keys of name i (and keys that do not match) on c; returns how many commands. */
static int t_append(redisContext *c, int i)
{
    char name[32];
    snprintf(name, sizeof(name), "benchtop:%05d", i);
    int n = 3;
    if (i < 8000) {
        redisAppendCommand(c, "HSET %s 0b1c2d3e-0000-4000-8000-000000000000:1 1", name);
        redisAppendCommand(c, "PEXPIRE %s 600000", name);
        redisAppendCommand(c, "SET redisson_lock_token:{%s} %d", name, i);
        n += 2;
    } else {
        redisAppendCommand(c, "SET %s 3", name);
    }
    if (i >= 7000 && i < 8000) {
        redisAppendCommand(c, "RPUSH redisson_lock_queue:{%s} a:2 b:3", name);
        redisAppendCommand(c,
                           "ZADD redisson_lock_timeout:{%s} 9999999999999 a:2 "
                           "9999999999999 b:3",
                           name);
        n++;
    } else if (i >= 9000) {
        redisAppendCommand(c, "ZADD {%s}:timeout 9999999999999 0123456789abcdef", name);
    } else {
        redisAppendCommand(c, "SET benchtop-other:%05d 1", i);
    }
    redisAppendCommand(c, "SET benchtop_not:%05d 1", i);
    return n;
}

/* Writes the data set (or with del, deletes it), pipelined. */
static void t_data(redisContext *c, int del)
{
    int sent = 0;
    for (int i = 0; i < T_NAMES; i++) {
        if (del) {
            redisAppendCommand(c,
                               "UNLINK benchtop:%05d redisson_lock_token:{benchtop:%05d} "
                               "redisson_lock_queue:{benchtop:%05d} "
                               "redisson_lock_timeout:{benchtop:%05d} {benchtop:%05d}:timeout "
                               "benchtop-other:%05d benchtop_not:%05d",
                               i, i, i, i, i, i, i);
            sent++;
        } else {
            sent += t_append(c, i);
        }
    }
    for (int i = 0; i < sent; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r->type == REDIS_REPLY_ERROR) {
            bench_die("top: writing the data set failed");
        }
        freeReplyObject(r);
    }
}

static int t_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_top(void)
{
    redisContext *c = bench_raw(0);
    t_data(c, 0);
    rlock_client *cl = bench_client(0, 0, 0);
    int reps = g_cfg.reps > 0 ? g_cfg.reps * 3 : 5;
    double *ms = calloc((size_t)reps, sizeof(*ms));
    for (int r = 0; ms != NULL && r < reps; r++) {
        rlock_object_info *v = NULL;
        size_t n = 0;
        int64_t t0 = bench_now_ns();
        if (rlock_survey(cl, "benchtop:*", &v, &n) != RLOCK_OK || n != T_NAMES) {
            bench_die("top: rlock_survey gave %zu names: %s", n, rlock_last_error());
        }
        ms[r] = (double)(bench_now_ns() - t0) / 1e6;
        rlock_survey_free(v, n);
    }
    if (ms == NULL) {
        bench_die("top: no memory");
    }
    qsort(ms, (size_t)reps, sizeof(*ms), t_cmp);
    double p50 = ms[reps / 2], worst = ms[reps - 1];
    bench_row("top", "refresh of 10,000 names, ms (p50)", NAN, p50, "<= 1000", worst <= 1000);
    bench_row("top", "refresh of 10,000 names, ms (max)", NAN, worst, "<= 1000", worst <= 1000);
    bench_json j;
    bench_json_begin(&j, "top");
    BENCH_JSON_NUMS(&j, {"names", T_NAMES}, {"refresh_ms_p50", p50}, {"refresh_ms_max", worst},
                    {"reps", reps});
    bench_json_end(&j);
    free(ms);
    rlock_client_free(cl);
    t_data(c, 1);
    redisFree(c);
    return 0;
}
