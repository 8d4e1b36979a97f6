/*
 * Helpers shared by the fair lock's test programs (tests/fair/). Everything is static inline so
 * each program compiles its own copy; the header has no state of its own.
 *
 * Threads never share the harness' cached admin connection (rh_cmd*), which is not thread-safe:
 * a thread that talks to Redis directly opens its own connection.
 *
 * Multi-process ordering tests use worker children started with rh_spawn_self() (a fresh exec,
 * so the parent may already run threads):
 *   <prog> --fair-child <port> <name> <waiter_timeout_ms> <reps> <i1,i2,...>
 * The child opens one client and one fair handle and runs one thread per waiter index i. For
 * each repetition r the thread blocks on BLPOP fair:go:<name>:<r>:<i> (the parent's signal that
 * it is i's turn to join), then rlock_lock(), RPUSH fair:order:<name>:<r> i inside the critical
 * section, and rlock_unlock(). The parent signals waiter i only after waiter i-1 is visibly in
 * the queue (LLEN), so the join order is known, and compares the order list with it.
 */
#ifndef RLOCK_TESTS_FAIR_COMMON_H
#define RLOCK_TESTS_FAIR_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "client.h"
#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_thread.h"

#if defined(__SANITIZE_THREAD__)
#define FC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FC_TSAN 1
#endif
#endif
#ifndef FC_TSAN
#define FC_TSAN 0
#endif

#define FC_MAX_WAITERS 64

/* A client on s with the given waiter timeout and command timeout (0 = defaults). */
static inline rlock_client *fc_client_ex(int port, int64_t waiter_timeout_ms,
                                         int64_t command_timeout_ms)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    rlock_options o;
    tc_options_url(&o, url);
    o.waiter_timeout_ms = waiter_timeout_ms > 0 ? waiter_timeout_ms : o.waiter_timeout_ms;
    o.command_timeout_ms = command_timeout_ms > 0 ? command_timeout_ms : o.command_timeout_ms;
    return tc_client_try(&o);
}

static inline rlock_client *fc_client(const rh_server *s, int64_t waiter_timeout_ms)
{
    return fc_client_ex(rh_port(s), waiter_timeout_ms, 0);
}

/* Derived names of a lock name without '{'. */
static inline void fc_queue_key(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "redisson_lock_queue:{%s}", name);
}

static inline void fc_zset_key(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "redisson_lock_timeout:{%s}", name);
}

/* The calling thread's owner string on client c. */
static inline void fc_owner(const rlock_client *c, char *buf)
{
    rlk_owner(c, rlk_thread_id(), buf);
}

static inline long long fc_llen(rh_server *s, const char *name)
{
    char k[256];
    fc_queue_key(name, k, sizeof(k));
    const char *argv[] = {"LLEN", k, NULL};
    return rh_cmd_int(s, argv);
}

static inline long long fc_zcard(rh_server *s, const char *name)
{
    char k[256];
    fc_zset_key(name, k, sizeof(k));
    const char *argv[] = {"ZCARD", k, NULL};
    return rh_cmd_int(s, argv);
}

/* Asserts (in a cmocka test) that name's queue and timeout zset are both empty: no waiter left. */
#define FC_ASSERT_NO_WAITERS(s, name)                                                              \
    do {                                                                                           \
        assert_int_equal(fc_llen((s), (name)), 0);                                                 \
        assert_int_equal(fc_zcard((s), (name)), 0);                                                \
    } while (0)

/* Copies up to max elements of LRANGE key 0 -1 into out (malloc()ed strings); returns the
 * count, or -1 on error. */
static inline int fc_lrange(rh_server *s, const char *key, char **out, int max)
{
    const char *argv[] = {"LRANGE", key, "0", "-1", NULL};
    redisReply *r = rh_cmd(s, argv);
    int n = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
        n = 0;
        for (size_t i = 0; i < r->elements && n < max; i++) {
            out[n++] = strdup(r->element[i]->str);
        }
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return n;
}

static inline void fc_free_strings(char **v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i]);
    }
}

/* 1 if owner is in the queue list of name, 0 if not, -1 on error. */
/* 1 when argv's reply has type found, 0 when it is nil, -1 on anything else. */
static inline int fc_found(rh_server *s, const char *const *argv, int found)
{
    redisReply *r = rh_cmd(s, argv);
    int v = -1;
    if (r != NULL) {
        v = r->type == found ? 1 : r->type == REDIS_REPLY_NIL ? 0 : -1;
        freeReplyObject(r);
    }
    return v;
}

static inline int fc_in_queue(rh_server *s, const char *name, const char *owner)
{
    char k[256];
    fc_queue_key(name, k, sizeof(k));
    const char *argv[] = {"LPOS", k, owner, NULL};
    return fc_found(s, argv, REDIS_REPLY_INTEGER);
}

/* 1 if owner has a score in the zset of name, 0 if not, -1 on error. */
static inline int fc_in_zset(rh_server *s, const char *name, const char *owner)
{
    char k[256];
    fc_zset_key(name, k, sizeof(k));
    const char *argv[] = {"ZSCORE", k, owner, NULL};
    return fc_found(s, argv, REDIS_REPLY_STRING);
}

/* The server's clock in ms (TIME), or -1. */
static inline int64_t fc_server_now(rh_server *s)
{
    const char *argv[] = {"TIME", NULL};
    redisReply *r = rh_cmd(s, argv);
    int64_t v = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        v = strtoll(r->element[0]->str, NULL, 10) * 1000 +
            strtoll(r->element[1]->str, NULL, 10) / 1000;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return v;
}

/* Polls until the queue of name has exactly n entries; 0, or -1 after timeout_ms. */
static inline int fc_wait_llen(rh_server *s, const char *name, long long n, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + timeout_ms;
    while (fc_llen(s, name) != n) {
        if (rh_now_ms() >= deadline) {
            return -1;
        }
        rh_sleep_ms(1);
    }
    return 0;
}

/* ---- worker children ---------------------------------------------------------------------- */

typedef struct fc_child_waiter {
    int port;
    rlock *l;
    const char *name;
    int index;
    int reps;
    int errors;
} fc_child_waiter;

static inline void *fc_child_thread(void *arg)
{
    fc_child_waiter *w = arg;
    redisContext *ctx = redisConnect("127.0.0.1", w->port);
    if (ctx == NULL || ctx->err) {
        w->errors++;
        return NULL;
    }
    char idx[16];
    snprintf(idx, sizeof(idx), "%d", w->index);
    for (int r = 0; r < w->reps; r++) {
        char go[256], order[256];
        snprintf(go, sizeof(go), "fair:go:%s:%d:%d", w->name, r, w->index);
        snprintf(order, sizeof(order), "fair:order:%s:%d", w->name, r);
        const char *blpop[] = {"BLPOP", go, "60"};
        redisReply *rep = redisCommandArgv(ctx, 3, blpop, NULL);
        int ok = rep != NULL && rep->type == REDIS_REPLY_ARRAY;
        if (rep != NULL) {
            freeReplyObject(rep);
        }
        if (!ok) {
            w->errors++;
            break;
        }
        int rc = rlock_lock(w->l, -1);
        if (rc != RLOCK_OK) {
            fprintf(stderr, "child waiter %d: lock: %s: %s\n", w->index, rlock_strerror(rc),
                    rlock_last_error());
            w->errors++;
            continue;
        }
        const char *push[] = {"RPUSH", order, idx};
        if (tc_int(ctx, 3, push) < 1) {
            w->errors++;
        }
        if (rlock_unlock(w->l) != RLOCK_OK) {
            w->errors++;
        }
    }
    redisFree(ctx);
    return NULL;
}

/* argv: <prog> --fair-child <port> <name> <waiter_timeout_ms> <reps> <i1,i2,...> */
static inline int fc_child_main(int argc, char **argv)
{
    if (argc < 7) {
        return 2;
    }
    int port = atoi(argv[2]);
    const char *name = argv[3];
    rlock_client *c = fc_client_ex(port, atoll(argv[4]), 0);
    if (c == NULL) {
        return 2;
    }
    rlock *l = rlock_open(c, RLOCK_FAIR, name);
    if (l == NULL) {
        rlock_client_free(c);
        return 2;
    }
    fc_child_waiter w[FC_MAX_WAITERS];
    int n = 0;
    memset(w, 0, sizeof(w));
    for (char *p = argv[6]; *p != '\0' && n < FC_MAX_WAITERS;) {
        w[n].port = port;
        w[n].l = l;
        w[n].name = name;
        w[n].reps = atoi(argv[5]);
        w[n].index = (int)strtol(p, &p, 10);
        n++;
        if (*p == ',') {
            p++;
        }
    }
    int started = tc_threads_run(n, fc_child_thread, w, sizeof(w[0]));
    int errors = started == n ? 0 : 1;
    for (int i = 0; i < started; i++) {
        errors += w[i].errors;
    }
    rlock_free(l);
    rlock_client_free(c);
    return errors == 0 ? 0 : 1;
}

/* A fair test program's main(): with --fair-child it is a worker child (fc_child_main());
 * otherwise it runs the cmocka tests given after setup and teardown as one group. */
#define FC_MAIN(setup, teardown, ...)                                                              \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        if (argc > 1 && strcmp(argv[1], "--fair-child") == 0) {                                    \
            return fc_child_main(argc, argv);                                                      \
        }                                                                                          \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, setup, teardown);                                     \
    }

/* Starts a worker child for the comma-separated waiter indices. */
static inline pid_t fc_spawn_child(rh_server *s, const char *name, int64_t waiter_timeout_ms,
                                   int reps, const char *indices)
{
    char port[16], wt[24], rp[16];
    snprintf(port, sizeof(port), "%d", rh_port(s));
    snprintf(wt, sizeof(wt), "%lld", (long long)waiter_timeout_ms);
    snprintf(rp, sizeof(rp), "%d", reps);
    const char *argv[] = {"self", "--fair-child", port, name, wt, rp, indices, NULL};
    return rh_spawn_self(argv);
}

/* Lets waiter i of repetition rep join (it was blocked on its go key). */
static inline int fc_signal(rh_server *s, const char *name, int rep, int i)
{
    char go[256];
    snprintf(go, sizeof(go), "fair:go:%s:%d:%d", name, rep, i);
    const char *argv[] = {"RPUSH", go, "1", NULL};
    return rh_cmd_int(s, argv) >= 1 ? 0 : -1;
}

/* Lets waiters 0..n-1 join one after the other, each once the previous one is visibly queued
 * (the caller holds the lock, so the queue only grows). 0, or -1 if one did not show up. */
static inline int fc_join_in_order(rh_server *s, const char *name, int rep, int n)
{
    for (int i = 0; i < n; i++) {
        if (fc_signal(s, name, rep, i) != 0 || fc_wait_llen(s, name, i + 1, 10000) != 0) {
            fprintf(stderr, "waiter %d of repetition %d did not join the queue\n", i, rep);
            return -1;
        }
    }
    return 0;
}

/* Reads the acquisition order of repetition rep into order[] once it has n entries (polling up
 * to timeout_ms). Returns the number of entries read. */
static inline int fc_read_order(rh_server *s, const char *name, int rep, int n, int *order,
                                int64_t timeout_ms)
{
    char key[256];
    snprintf(key, sizeof(key), "fair:order:%s:%d", name, rep);
    const char *llen[] = {"LLEN", key, NULL};
    int64_t deadline = rh_now_ms() + timeout_ms;
    while (rh_cmd_int(s, llen) < n && rh_now_ms() < deadline) {
        rh_sleep_ms(5);
    }
    char *v[FC_MAX_WAITERS];
    int got = fc_lrange(s, key, v, FC_MAX_WAITERS);
    for (int i = 0; i < got; i++) {
        order[i] = atoi(v[i]);
    }
    fc_free_strings(v, got);
    return got;
}

/* Number of pairs (i < j) with order[i] > order[j]. */
static inline int fc_inversions(const int *order, int n)
{
    int inv = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            inv += order[i] > order[j];
        }
    }
    return inv;
}

#endif
