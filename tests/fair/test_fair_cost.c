/*
 * The cost of the fair queue does not grow with its length (not timed: counted). Redis counts in
 * INFO commandstats every command that scripts call, so the number of Redis commands of one
 * operation can be compared between a queue of 10 and a queue of 2,000 waiters:
 *  - a grant through the public API: the holder's rlock_unlock() and the first waiter's wake-up
 *    and acquisition (fair_release + fair_acquire);
 *  - an enqueue (fair_acquire of a new waiter) and a give-up in the middle (fair_leave).
 * Every command count must be identical for both lengths. (The give-up's one LREM scans the list
 * inside Redis up to the waiter; the command count is still constant, see lock_fair.c.)
 *
 * The waiters behind the first are synthetic owners ("synthetic:<i>") queued by running the
 * fair_acquire script directly, as another client's waiters would be. Their liveness deadlines
 * are set 120 s ahead (waiter timeout 120000) so that they stay alive for the whole test without
 * heartbeats, and the real waiter's client uses the same timeout so that no heartbeat falls into
 * a measurement.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "lock.h"
#include "scripts.h"
#include "tc_thread.h"

#define WT       120000
#define MAX_CMDS 32

static rh_server *g_srv;
static rlock_client *g_client;

typedef struct cmdcount {
    int n;
    char name[MAX_CMDS][64];
    long long calls[MAX_CMDS];
} cmdcount;

/* Data commands counted since the last CONFIG RESETSTAT (admin and pub/sub bookkeeping of the
 * test itself and of the subscriber connection excluded). */
static void read_counts(cmdcount *out)
{
    static const char *const skip[] = {
        "info", "config|resetstat", "subscribe", "unsubscribe", "psubscribe", "punsubscribe",
        "ping", "client|setname",   "select",    "auth",        "hello",      "command|docs"};
    const char *argv[] = {"INFO", "commandstats", NULL};
    char *info = rh_cmd_str(g_srv, argv);
    memset(out, 0, sizeof(*out));
    assert_non_null(info);
    for (char *line = strtok(info, "\r\n"); line != NULL; line = strtok(NULL, "\r\n")) {
        char name[64];
        long long calls;
        if (sscanf(line, "cmdstat_%63[^:]:calls=%lld", name, &calls) != 2) {
            continue;
        }
        int skipped = 0;
        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
            skipped |= strcmp(name, skip[i]) == 0;
        }
        if (!skipped && out->n < MAX_CMDS) {
            snprintf(out->name[out->n], sizeof(out->name[0]), "%s", name);
            out->calls[out->n++] = calls;
        }
    }
    free(info);
}

static long long total(const cmdcount *c)
{
    long long t = 0;
    for (int i = 0; i < c->n; i++) {
        t += c->calls[i];
    }
    return t;
}

static void print_counts(const char *what, int waiters, const cmdcount *c)
{
    char buf[512] = "";
    for (int i = 0; i < c->n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof(buf) - len, " %s=%lld", c->name[i], c->calls[i]);
    }
    print_message("%-8s %5d waiters: %lld commands:%s\n", what, waiters, total(c), buf);
}

static void assert_same_counts(const cmdcount *a, const cmdcount *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        int j = 0;
        while (j < b->n && strcmp(a->name[i], b->name[j]) != 0) {
            j++;
        }
        assert_true(j < b->n);
        assert_int_equal(a->calls[i], b->calls[j]);
    }
}

static void reset_stats(void)
{
    assert_int_equal(rh_reset_stats(g_srv), 0);
}

/* The KEYS of the fair scripts for lock l (the token key only for fair_acquire) and a synthetic
 * owner's name; rlk_args keeps pointers, so the strings live here. */
typedef struct synthetic {
    char owner[32], queue[128], zset[128], token[128], channel[128];
    rlk_args keys, args;
} synthetic;

static void synthetic_init(synthetic *y, rlock *l, int i, int with_token)
{
    snprintf(y->owner, sizeof(y->owner), "synthetic:%d", i);
    snprintf(y->queue, sizeof(y->queue), "redisson_lock_queue:{%s}", l->name);
    snprintf(y->zset, sizeof(y->zset), "redisson_lock_timeout:{%s}", l->name);
    snprintf(y->token, sizeof(y->token), "redisson_lock_token:{%s}", l->name);
    snprintf(y->channel, sizeof(y->channel), "redisson_lock__channel:{%s}", l->name);
    rlk_args_init(&y->keys);
    rlk_args_adds(&y->keys, l->name);
    rlk_args_adds(&y->keys, y->queue);
    rlk_args_adds(&y->keys, y->zset);
    if (with_token) {
        rlk_args_adds(&y->keys, y->token);
    }
    rlk_args_adds(&y->keys, y->channel);
    rlk_args_init(&y->args);
}

/* Runs fair_acquire (may_queue = 1) for a synthetic owner. */
static void enqueue_synthetic(rlock *l, int i)
{
    synthetic y;
    synthetic_init(&y, l, i, 1);
    rlk_args_addi(&y.args, 30000);
    rlk_args_adds(&y.args, y.owner);
    rlk_args_addi(&y.args, WT);
    rlk_args_adds(&y.args, "1");
    redisReply *r = NULL;
    assert_int_equal(rlk_script(g_client, RLK_SCRIPT_FAIR_ACQUIRE, 0, &y.keys, &y.args, &r),
                     RLOCK_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->element[0]->integer, 0);
    freeReplyObject(r);
}

/* Runs fair_leave for a synthetic owner. */
static void leave_synthetic(rlock *l, int i)
{
    synthetic y;
    synthetic_init(&y, l, i, 0);
    rlk_args_adds(&y.args, y.owner);
    rlk_args_adds(&y.args, "0");
    redisReply *r = NULL;
    assert_int_equal(rlk_script(g_client, RLK_SCRIPT_FAIR_LEAVE, 0, &y.keys, &y.args, &r),
                     RLOCK_OK);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
}

/* Measures a grant, an enqueue and a give-up with n waiters queued. */
static void measure(int n, cmdcount *grant, cmdcount *enq, cmdcount *leave)
{
    char name[64];
    snprintf(name, sizeof(name), "fair:cost:%d", n);
    rlock *l = tc_open(g_client, RLOCK_FAIR, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    tc_holder w;
    tc_holder_start(&w, l, -1, -1, -1);
    assert_int_equal(fc_wait_llen(g_srv, name, 1, 5000), 0);
    for (int i = 1; i < n; i++) {
        enqueue_synthetic(l, i);
    }
    assert_int_equal(fc_llen(g_srv, name), n);
    assert_int_equal(fc_zcard(g_srv, name), n);
    /* Let the waiter settle in its wait (its first wake-up is the SUBSCRIBE confirmation). */
    rh_sleep_ms(100);

    reset_stats();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(tc_holder_wait(&w, 5000), RLOCK_OK);
    rh_sleep_ms(50);
    read_counts(grant);
    assert_int_equal(fc_llen(g_srv, name), n - 1);

    reset_stats();
    enqueue_synthetic(l, n);
    read_counts(enq);
    reset_stats();
    leave_synthetic(l, n / 2);
    read_counts(leave);
    assert_int_equal(fc_llen(g_srv, name), n - 1);

    assert_int_equal(tc_holder_join(&w), RLOCK_OK);
    char queue[128], zset[128];
    fc_queue_key(name, queue, sizeof(queue));
    fc_zset_key(name, zset, sizeof(zset));
    const char *del[] = {"DEL", name, queue, zset, NULL};
    rh_cmd_int(g_srv, del);
    rlock_free(l);
}

static void test_grant_cost_independent_of_queue_length(void **state)
{
    (void)state;
    cmdcount g10, e10, l10, g2k, e2k, l2k;
    /* A first round loads the scripts (NOSCRIPT, SCRIPT LOAD), which is not part of the cost. */
    measure(10, &g10, &e10, &l10);
    measure(10, &g10, &e10, &l10);
    measure(2000, &g2k, &e2k, &l2k);
    print_counts("grant", 10, &g10);
    print_counts("grant", 2000, &g2k);
    print_counts("enqueue", 10, &e10);
    print_counts("enqueue", 2000, &e2k);
    print_counts("give-up", 10, &l10);
    print_counts("give-up", 2000, &l2k);
    /* The grant really ran scripts (release and acquire), and nothing scaled with the queue:
     * Redisson's grant issued one ZINCRBY per remaining waiter. */
    assert_true(total(&g10) >= 10);
    assert_same_counts(&g10, &g2k);
    assert_same_counts(&e10, &e2k);
    assert_same_counts(&l10, &l2k);
    for (int i = 0; i < g2k.n; i++) {
        assert_true(strcmp(g2k.name[i], "zincrby") != 0);
    }
}

/* The client's waiter timeout is WT. */
static void tune(rlock_options *o)
{
    o->waiter_timeout_ms = WT;
}

TC_FIXTURE(g_srv, g_client, tune)

TC_MAIN(setup, teardown, cmocka_unit_test(test_grant_cost_independent_of_queue_length))
