/*
 * What an uncontended lock+unlock pair costs Redis, for each lock kind: the commands its two
 * scripts run (INFO commandstats counts them beside EVALSHA), over 20 pairs nobody waits for.
 * Each redis.call costs a script about as much as its whole argument list, so the path that no
 * waiter takes runs no waiter or grant bookkeeping, reads no clock and checks an owner with the
 * read that also gives its count. A pair that runs any other command fails here. And the
 * reentrant lock's first attempt carries the waiters' keys only on a handle its thread has found
 * busy (seen with MONITOR).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "scripts.h"
#include "tc_redis.h"

#define PAIRS 20

/* One kind's pair and the commands its scripts run, one word per call (a command that runs
 * twice a pair is named twice). */
typedef struct cost_case {
    const char *what;
    rlock_kind kind;
    int single; /* 1: rlock_try_lock(l, 0, lease), a single attempt; 0: rlock_lock() */
    const char *cmds;
} cost_case;

/* Redisson's own pair runs EXISTS HINCRBY PEXPIRE, then GET HEXISTS HINCRBY DEL PUBLISH SET (its
 * unlock latch) and a DEL of the latch; the reentrant pair adds the token's INCR. */
#define REENTRANT_CMDS "exists hincrby pexpire incr hget del publish"
static const cost_case g_cases[] = {
    {"reentrant", RLOCK_REENTRANT, 0, REENTRANT_CMDS},
    {"reentrant, single attempt", RLOCK_REENTRANT, 1, REENTRANT_CMDS},
    {"spin", RLOCK_SPIN, 0, REENTRANT_CMDS},
    {"fair", RLOCK_FAIR, 0, "time lindex exists zrem hdel hset pexpire incr lindex hget del"},
    {"read", RLOCK_READ, 0, "hget zrange hset set pexpire get hget hget hlen del publish zrange"},
    {"write", RLOCK_WRITE, 0, "hget hset pexpire zrem incr hget hget hget del publish zrange"},
};

/* How many words the space-separated list has. */
static long long cost_words(const char *list)
{
    long long n = 0;
    for (const char *p = list + strspn(list, " "); *p != '\0'; p += strspn(p, " ")) {
        p += strcspn(p, " ");
        n++;
    }
    return n;
}

/* How many times the word cmd appears in the space-separated list. */
static long long cost_count(const char *list, const char *cmd)
{
    long long n = 0;
    size_t len = strlen(cmd);
    for (const char *p = list; *p != '\0'; p += strcspn(p, " "), p += strspn(p, " ")) {
        n += strncmp(p, cmd, len) == 0 && (p[len] == ' ' || p[len] == '\0');
    }
    return n;
}

/* Calls of every command since the last reset, from INFO commandstats, into names/calls (at
 * most max); returns how many. The INFO and CONFIG RESETSTAT of the test itself are left out. */
static int cost_stats(rh_server *s, char (*names)[48], long long *calls, int max)
{
    const char *argv[] = {"INFO", "commandstats", NULL};
    redisReply *r = rh_cmd(s, argv);
    assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\r\n", &save); line != NULL && n < max;
         line = strtok_r(NULL, "\r\n", &save)) {
        if (sscanf(line, "cmdstat_%47[^:]:calls=%lld", names[n], &calls[n]) == 2 &&
            strcmp(names[n], "info") != 0 && strcmp(names[n], "config|resetstat") != 0) {
            n++;
        }
    }
    freeReplyObject(r);
    return n;
}

static int cost_pair(rlock *l, int single)
{
    int r = single ? rlock_try_lock(l, 0, 30000) : rlock_lock(l, 30000);
    return r == RLOCK_OK ? rlock_unlock(l) : r;
}

/* Runs PAIRS pairs of c's kind and checks every command Redis ran against c's table. */
static void cost_check(rh_server *s, rlock_client *cl, const cost_case *c, size_t idx)
{
    char name[32];
    snprintf(name, sizeof(name), "cost:%zu", idx);
    rlock *l = tc_open(cl, c->kind, name);
    assert_int_equal(cost_pair(l, c->single), RLOCK_OK); /* loads the scripts */
    assert_int_equal(rh_reset_stats(s), 0);
    for (int i = 0; i < PAIRS; i++) {
        assert_int_equal(cost_pair(l, c->single), RLOCK_OK);
    }
    char names[64][48];
    long long calls[64];
    int n = cost_stats(s, names, calls, 64);
    int bad = 0;
    long long total = 0;
    for (int i = 0; i < n; i++) {
        long long want = strcmp(names[i], "evalsha") == 0 ? 2 : cost_count(c->cmds, names[i]);
        print_message("%-26s %-10s %3lld calls (%lld expected)\n", c->what, names[i], calls[i],
                      want * PAIRS);
        bad += calls[i] != want * PAIRS;
        total += strcmp(names[i], "evalsha") == 0 ? 0 : want;
    }
    /* Every expected command ran: the calls found cover every word of the list. */
    bad += total != cost_words(c->cmds);
    assert_int_equal(bad, 0);
    rlock_free(l);
}

static void test_uncontended_pairs_run_only_their_commands(void **state)
{
    rh_server *s = *state;
    rlock_client *cl = tc_client_tuned(s, 0, 0, NULL, NULL);
    for (size_t i = 0; i < sizeof(g_cases) / sizeof(g_cases[0]); i++) {
        cost_check(s, cl, &g_cases[i], i);
    }
    rlock_client_free(cl);
}

/* The numkeys of the next lock_acquire EVALSHA that MONITOR connection m shows (-1: none within
 * its read timeout). */
static int next_acquire_numkeys(redisContext *m)
{
    char want[64];
    snprintf(want, sizeof(want), "\"EVALSHA\" \"%s\" \"",
             rlk_script_table[RLK_SCRIPT_LOCK_ACQUIRE].sha1);
    redisReply *r = NULL;
    while (redisGetReply(m, (void **)&r) == REDIS_OK) {
        const char *p = r->type == REDIS_REPLY_STATUS ? strstr(r->str, want) : NULL;
        int n = p != NULL ? atoi(p + strlen(want)) : -1;
        freeReplyObject(r);
        if (n >= 0) {
            return n;
        }
    }
    return -1;
}

/* An uncontended rlock_lock() sends the lock and its counter only; once the lock was found busy
 * the attempt that follows at once, and the thread's next lock() on that handle, carry the
 * waiters' keys, so the waiter was recorded as before. */
static void test_first_attempt_carries_waiter_keys_only_after_busy(void **state)
{
    rh_server *s = *state;
    rlock_client *cl = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock *l = tc_open(cl, RLOCK_REENTRANT, "cost:brief");
    assert_int_equal(cost_pair(l, 0), RLOCK_OK); /* loads the scripts */
    redisContext *m = rh_connect(s);
    assert_non_null(m);
    redisReply *ok = redisCommand(m, "MONITOR");
    assert_true(ok != NULL && ok->type == REDIS_REPLY_STATUS);
    freeReplyObject(ok);
    assert_int_equal(cost_pair(l, 0), RLOCK_OK);
    assert_int_equal(next_acquire_numkeys(m), 2);
    /* Held by someone else (a Redisson-style hold): busy. */
    const char *hold[] = {"HSET", "cost:brief", "peer:1", "1", NULL};
    const char *expire[] = {"PEXPIRE", "cost:brief", "30000", NULL};
    assert_int_equal(rh_cmd_int(s, hold), 1);
    assert_int_equal(rh_cmd_int(s, expire), 1);
    assert_int_equal(rlock_try_lock(l, 200, 30000), RLOCK_ETIMEDOUT);
    assert_int_equal(next_acquire_numkeys(m), 2);
    assert_int_equal(next_acquire_numkeys(m), 5);
    const char *del[] = {"DEL", "cost:brief", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    assert_int_equal(cost_pair(l, 0), RLOCK_OK);
    /* The wait's own retries, then that lock(): the last attempt of all (MONITOR's read times
     * out after it) carried the waiters' keys. */
    int n, last = -1;
    while ((n = next_acquire_numkeys(m)) >= 0) {
        last = n;
    }
    assert_int_equal(last, 5);
    redisFree(m);
    rlock_free(l);
    rlock_client_free(cl);
}

TC_MAIN(NULL, NULL, TC_SERVER_TEST(test_uncontended_pairs_run_only_their_commands),
        TC_SERVER_TEST(test_first_attempt_carries_waiter_keys_only_after_busy))
