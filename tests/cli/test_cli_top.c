/*
 * rlock top (issue 31): the built binary (argv[1]) against a real redis-server holding one of
 * each kind of object, with waiters, a name that does not match, and Redisson's auxiliary keys;
 * --once --json field by field, plain --once text, rlock_survey() with a read failing mid-pipeline,
 * a read-only ACL user, bad input, and q (and
 * SIGTERM) ending the live view on a pseudo-terminal with the terminal restored.
 */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_spawn.h"
#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_thread.h"

static rh_server *g_srv;
static rlock_client *g_c;

/* What the prepared set holds, for the checks. */
static struct {
    rlock *re, *fair, *read, *write, *other;
    rlock_semaphore *sem, *count, *leased;
    rlock_latch *latch;
    char permit[RLOCK_PERMIT_ID_LEN + 1];
    tc_bg bg[6];
} g;

static int bg_lock(void *arg)
{
    int rc = rlock_try_lock(arg, 50000, -1);
    return rc == RLOCK_OK ? rlock_unlock(arg) : rc;
}

static int bg_sem(void *arg)
{
    int rc = rlock_semaphore_acquire(arg, 1, 50000);
    return rc == RLOCK_OK ? rlock_semaphore_release(arg, 1) : rc;
}

static int bg_latch(void *arg)
{
    return rlock_latch_await(arg, 50000);
}

static size_t inspect_count(const char *name, int what)
{
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(g_c, name, &in), RLOCK_OK);
    size_t n = what == 0 ? in->n_queue : what == 1 ? in->n_writers : in->n_waiters;
    rlock_lock_info_free(in);
    return n;
}

static void await_count(const char *name, int what, size_t want)
{
    for (int i = 0; i < 500 && inspect_count(name, what) != want; i++) {
        rh_sleep_ms(10);
    }
    assert_int_equal(inspect_count(name, what), want);
}

/* The locks with their waiters (fair: 2 queued, read-write: a waiting writer, reentrant: a
 * waiting rlock thread), a semaphore with a waiter, one nobody waits for, a leased semaphore, a
 * latch with a waiter and a lock whose name does not match. */
static void prepare(void)
{
    g.re = tc_hold(g_c, RLOCK_REENTRANT, "top:re");
    g.fair = tc_hold(g_c, RLOCK_FAIR, "top:fair");
    g.read = tc_hold(g_c, RLOCK_READ, "top:rw");
    g.write = tc_open(g_c, RLOCK_WRITE, "top:rw");
    g.other = tc_hold(g_c, RLOCK_REENTRANT, "other:x");
    tc_bg_start(&g.bg[0], bg_lock, g.fair);
    tc_bg_start(&g.bg[1], bg_lock, g.fair);
    tc_bg_start(&g.bg[2], bg_lock, g.write);
    tc_bg_start(&g.bg[3], bg_lock, g.re);
    g.sem = rlock_semaphore_open(g_c, "top:sem");
    g.count = rlock_semaphore_open(g_c, "top:count");
    g.leased = rlock_semaphore_open(g_c, "top:leased");
    g.latch = rlock_latch_open(g_c, "top:latch");
    assert_int_equal(rlock_semaphore_try_set_permits(g.sem, 1), 1);
    assert_int_equal(rlock_semaphore_acquire(g.sem, 1, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_try_set_permits(g.count, 5), 1);
    assert_int_equal(rlock_semaphore_try_set_permits(g.leased, 3), 1);
    assert_int_equal(rlock_semaphore_acquire_leased(g.leased, 0, 60000, g.permit), RLOCK_OK);
    assert_int_equal(rlock_latch_try_set_count(g.latch, 2), 1);
    tc_bg_start(&g.bg[4], bg_sem, g.sem);
    tc_bg_start(&g.bg[5], bg_latch, g.latch);
    await_count("top:fair", 0, 2);
    await_count("top:rw", 1, 1);
    await_count("top:re", 2, 1);
    assert_true(tc_wait_numsub(g_srv, "redisson_sc:{top:sem}", 1, 5000));
    assert_true(tc_wait_numsub(g_srv, "redisson_countdownlatch__channel__{top:latch}", 1, 5000));
}

static void release_all(void)
{
    assert_int_equal(rlock_unlock(g.fair), RLOCK_OK);
    assert_int_equal(rlock_unlock(g.read), RLOCK_OK);
    assert_int_equal(rlock_unlock(g.re), RLOCK_OK);
    assert_int_equal(rlock_unlock(g.other), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release(g.sem, 1), RLOCK_OK);
    assert_int_equal(rlock_latch_count_down(g.latch), RLOCK_OK);
    assert_int_equal(rlock_latch_count_down(g.latch), RLOCK_OK);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(tc_bg_join(&g.bg[i]), RLOCK_OK);
    }
    assert_int_equal(rlock_semaphore_release_leased(g.leased, g.permit), RLOCK_OK);
    rlock_free(g.re);
    rlock_free(g.fair);
    rlock_free(g.read);
    rlock_free(g.write);
    rlock_free(g.other);
    rlock_semaphore_free(g.sem);
    rlock_semaphore_free(g.count);
    rlock_semaphore_free(g.leased);
    rlock_latch_free(g.latch);
}

/* The line of the JSON document that holds the object called name (one object per line). */
static const char *object_line(const char *doc, const char *name)
{
    static char line[2048];
    char key[128];
    snprintf(key, sizeof(key), "{\"name\":\"%s\"", name);
    const char *p = strstr(doc, key);
    if (p == NULL) {
        fail_msg("no object %s in %s", name, doc);
        return "";
    }
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    assert_true(n < sizeof(line));
    memcpy(line, p, n);
    line[n] = '\0';
    return line;
}

static long long jint(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof(k), "\"%s\":", key);
    const char *p = strstr(line, k);
    if (p == NULL || p[strlen(k)] == 'n') {
        fail_msg("no number %s in %s", key, line);
        return 0;
    }
    return strtoll(p + strlen(k), NULL, 10);
}

static int jhas(const char *line, const char *key, const char *raw_value)
{
    char k[256];
    snprintf(k, sizeof(k), "\"%s\":%s", key, raw_value);
    return strstr(line, k) != NULL;
}

/* How many objects the array key holds. */
static int jlen(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof(k), "\"%s\":[", key);
    const char *p = strstr(line, k);
    assert_non_null(p);
    int n = 0;
    for (p += strlen(k); *p != ']'; p++) {
        n += *p == '{';
    }
    return n;
}

/* The owner every hold of this test shows: the client's id and some thread. */
static void assert_owner(const char *line, const char *array)
{
    char k[128];
    snprintf(k, sizeof(k), "\"%s\":[{\"owner\":\"%s:", array, rlock_client_id(g_c));
    if (strstr(line, k) == NULL) {
        fail_msg("%s: no owner of this client in %s", array, line);
    }
}

static void check_locks(const char *doc)
{
    const char *l = object_line(doc, "top:fair");
    assert_true(jhas(l, "type", "\"fair\"") && jint(l, "waiters") == 2);
    assert_int_equal(jlen(l, "holders"), 1);
    assert_owner(l, "holders");
    assert_int_equal(jlen(l, "queue"), 2);
    assert_owner(l, "queue");
    assert_true(jint(l, "ttl_ms") > 0 && jint(l, "ttl_ms") <= 30000 && jint(l, "token") >= 1);
    assert_true(jhas(l, "mode", "null") && jlen(l, "writers") == 0 && jlen(l, "leases") == 0);
    assert_true(jhas(l, "permits", "null") && jhas(l, "latch_count", "null"));
    l = object_line(doc, "top:rw");
    assert_true(jhas(l, "type", "\"read-write\"") && jhas(l, "mode", "\"read\""));
    assert_true(jint(l, "waiters") == 1 && jlen(l, "writers") == 1 && jlen(l, "queue") == 0);
    assert_owner(l, "writers");
    assert_true(strstr(l, ":write\",\"deadline_ms\":") != NULL);
    assert_int_equal(jlen(l, "holders"), 1);
    assert_true(jint(l, "ttl_ms") > 0 && jint(l, "token") >= 0 && jhas(l, "listeners", "null"));
    l = object_line(doc, "top:re");
    assert_true(jhas(l, "type", "\"reentrant\"") && jint(l, "waiters") == 1);
    assert_true(jlen(l, "lock_waiters") == 1 && jlen(l, "holders") == 1);
    assert_owner(l, "lock_waiters");
    assert_true(jint(l, "ttl_ms") > 0 && jint(l, "token") >= 1 && jhas(l, "mode", "null"));
    assert_true(jlen(l, "queue") == 0 && jlen(l, "writers") == 0 && jhas(l, "permits", "null"));
    /* The fencing counter as rlock_inspect() reads it. */
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(g_c, "top:re", &in), RLOCK_OK);
    assert_int_equal(jint(l, "token"), (long long)in->token);
    rlock_lock_info_free(in);
}

static void check_counters(const char *doc)
{
    const char *l = object_line(doc, "top:sem");
    assert_true(jhas(l, "type", "\"semaphore\"") && jint(l, "permits") == 0);
    assert_true(jint(l, "listeners") == 1 && jint(l, "waiters") == 1);
    assert_true(jhas(l, "latch_count", "null") && jhas(l, "token", "null"));
    assert_true(jint(l, "ttl_ms") == -1 && jlen(l, "holders") == 0);
    l = object_line(doc, "top:count");
    assert_true(jhas(l, "type", "\"counter\"") && jint(l, "permits") == 5);
    assert_true(jint(l, "latch_count") == 5 && jint(l, "waiters") == 0);
    assert_true(jint(l, "listeners") == 0 && jhas(l, "token", "null") && jlen(l, "leases") == 0);
    l = object_line(doc, "top:leased");
    assert_true(jhas(l, "type", "\"semaphore_leased\"") && jint(l, "permits") == 2);
    assert_int_equal(jlen(l, "leases"), 1);
    char id[96];
    snprintf(id, sizeof(id), "\"leases\":[{\"id\":\"%s\",\"deadline_ms\":", g.permit);
    assert_non_null(strstr(l, id));
    assert_true(jint(l, "deadline_ms") > 0 && jint(l, "listeners") == 0);
    assert_true(jhas(l, "latch_count", "null") && jint(l, "ttl_ms") == -1);
    l = object_line(doc, "top:latch");
    assert_true(jhas(l, "type", "\"latch\"") && jint(l, "latch_count") == 2);
    assert_true(jhas(l, "permits", "null") && jint(l, "listeners") == 1);
    assert_int_equal(jint(l, "waiters"), 1);
    assert_true(jhas(l, "token", "null") && jint(l, "ttl_ms") == -1 && jlen(l, "leases") == 0);
    assert_true(jlen(l, "holders") == 0 && jlen(l, "queue") == 0 && jhas(l, "mode", "null"));
}

/* Runs rlock top with args (NULL-terminated, after "top") and returns its exit status. */
static int run_top(const char *url, const char *const *args, const char *out, const char *err)
{
    const char *argv[16] = {"rlock", "--url", url, "top"};
    int n = 4;
    for (int i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return ct_run(argv, out, err);
}

/* --once --json on the prepared set: every field of every object, the order (most waiters
 * first, then by name), no row for an auxiliary key or a name that does not match. */
static void test_top_json(void **state)
{
    (void)state;
    const char *args[] = {"--once", "--json", "*top:*", NULL};
    assert_int_equal(run_top(rh_url(g_srv), args, "json", "err"), 0);
    const char *doc = ct_slurp("json");
    for (const char *p = strstr(doc, "{\"name\":"); p != NULL; p = strstr(p + 1, "{\"name\":")) {
        print_message("%.40s\n", p);
    }
    assert_true(strncmp(doc, "{\"pattern\":\"*top:*\",\"count\":7,\"objects\":[", 41) == 0);
    check_locks(doc);
    check_counters(doc);
    assert_int_equal(ct_count_of(doc, "{\"name\":"), 7);
    assert_null(strstr(doc, "other:x"));
    assert_null(strstr(doc, "\"name\":\"redisson_"));
    assert_null(strstr(doc, "\"name\":\"{"));
    assert_null(strstr(doc, "\"name\":\"rlock_"));
    /* Sorted: fair (2 waiters); latch, re, rw, sem (1); count, leased (0). */
    const char *order[] = {"top:fair", "top:latch", "top:re",    "top:rw",
                           "top:sem",  "top:count", "top:leased"};
    for (int i = 1; i < 7; i++) {
        char a[64], b[64];
        snprintf(a, sizeof(a), "{\"name\":\"%s\"", order[i - 1]);
        snprintf(b, sizeof(b), "{\"name\":\"%s\"", order[i]);
        assert_true(strstr(doc, a) < strstr(doc, b));
    }
}

/* Plain --once: a header, one row per name with type, waiters and holder, in the same order. */
static void test_top_text(void **state)
{
    (void)state;
    const char *args[] = {"--once", "top:*", NULL};
    assert_int_equal(run_top(rh_url(g_srv), args, "text", "err"), 0);
    const char *out = ct_slurp("text");
    print_message("%s", out);
    assert_non_null(strstr(out, "rlock top top:*: 7 name(s)"));
    assert_non_null(strstr(out, "WAITERS  TYPE"));
    assert_int_equal(ct_count_of(out, "\n"), 9);
    assert_null(strstr(out, "other:x"));
    char holder[128];
    snprintf(holder, sizeof(holder), "  top:fair  %s:", rlock_client_id(g_c));
    assert_non_null(strstr(out, holder));
    assert_non_null(strstr(out, "      2  fair "));
    assert_non_null(strstr(out, "      1  latch "));
    assert_non_null(strstr(out, "      0  semaphore_leased "));
    assert_non_null(strstr(out, "1 lease(s), first "));
    assert_true(strstr(out, "top:fair") < strstr(out, "top:latch"));
    assert_true(strstr(out, "top:sem ") < strstr(out, "top:count"));
}

/* rlock_survey(): the same set through the library call, and its bad input. */
static void test_survey_api(void **state)
{
    (void)state;
    rlock_object_info *v = NULL;
    size_t n = 99;
    assert_int_equal(rlock_survey(NULL, "*", &v, &n), RLOCK_EINVAL);
    assert_true(v == NULL && n == 0);
    assert_int_equal(rlock_survey(g_c, "*", NULL, &n), RLOCK_EINVAL);
    char *big = malloc(2000);
    memset(big, 'a', 1999);
    big[1999] = '\0';
    assert_int_equal(rlock_survey(g_c, big, &v, &n), RLOCK_EINVAL);
    free(big);
    assert_int_equal(rlock_survey(g_c, "top:l*", &v, &n), RLOCK_OK);
    assert_int_equal(n, 2); /* top:latch, top:leased */
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].type == (strcmp(v[i].name, "top:latch") == 0
                                      ? RLOCK_OBJECT_LATCH
                                      : RLOCK_OBJECT_SEMAPHORE_LEASED));
    }
    rlock_survey_free(v, n);
    assert_int_equal(rlock_survey(g_c, "nothing:*", &v, &n), RLOCK_OK);
    assert_int_equal(n, 0);
    rlock_survey_free(v, n);
    rlock_survey_free(NULL, 0);
}

/* rlock_survey() when one name's read fails in the middle of a node's pipeline: the inspect
 * script of "srv:b" meets a fencing counter that is a hash (WRONGTYPE), so that name is left out
 * and the others are reported; a user whose ACL refuses srv:b's auxiliary keys gets NOPERM for
 * that one read, and the survey fails with RLOCK_EREDIS naming it. */
static void test_survey_node_errors(void **state)
{
    (void)state;
    const char *cmds[][5] = {{"HSET", "srv:a", "o:1", "1", NULL},
                             {"HSET", "srv:b", "o:1", "1", NULL},
                             {"HSET", "srv:c", "o:1", "1", NULL},
                             {"HSET", "redisson_lock_token:{srv:b}", "x", "1", NULL}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        assert_int_equal(rh_cmd_int(g_srv, cmds[i]), 1);
    }
    rlock_object_info *v = NULL;
    size_t n = 0;
    assert_int_equal(rlock_survey(g_c, "srv:*", &v, &n), RLOCK_OK);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_true(strcmp(v[i].name, "srv:a") == 0 || strcmp(v[i].name, "srv:c") == 0);
    }
    rlock_survey_free(v, n);
    const char *acl[] = {"ACL",
                         "SETUSER",
                         "narrow",
                         "reset",
                         "on",
                         ">narrow-pw",
                         "+@all",
                         "~srv:*",
                         "~redisson_lock_*:{srv:a}",
                         "~rlock_*:{srv:a}",
                         "~redisson_lock_*:{srv:c}",
                         "~rlock_*:{srv:c}",
                         NULL};
    char *ok = rh_cmd_str(g_srv, acl);
    assert_string_equal(ok, "OK");
    free(ok);
    rlock_options o;
    tc_options(&o, g_srv);
    char url[256];
    snprintf(url, sizeof(url), "redis://narrow:narrow-pw@127.0.0.1:%d", rh_port(g_srv));
    o.url = url;
    rlock_client *c = tc_client(&o);
    int rc = rlock_survey(c, "srv:*", &v, &n);
    print_message("narrow user: %d %s\n", rc, rlock_last_error());
    assert_int_equal(rc, RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "NOPERM"));
    assert_true(v == NULL && n == 0);
    rlock_client_free(c);
    const char *del[] = {"DEL", "srv:a", "srv:b", "srv:c", "redisson_lock_token:{srv:b}", NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 4);
}

/* A user with read commands only (no write command, no EVALSHA: EVALSHA_RO, whose script Redis
 * refuses to let write), plus SCAN, INFO and PUBSUB NUMSUB: top shows the same set. A write
 * (or a writing script) would be refused with NOPERM and make it exit 4. */
static void test_top_readonly_user(void **state)
{
    (void)state;
    /* docs/cli.md's rule set, for names that start with "top:". */
    const char *acl[] = {"ACL",
                         "SETUSER",
                         "viewer",
                         "reset",
                         "on",
                         ">viewer-pw",
                         "+ping",
                         "+info",
                         "+scan",
                         "+time",
                         "+type",
                         "+get",
                         "+pttl",
                         "+hgetall",
                         "+lrange",
                         "+zscore",
                         "+zrange",
                         "+evalsha_ro",
                         "+script|load",
                         "+pubsub|numsub",
                         "~top:*",
                         "~{top:*",
                         "~redisson_lock_*:{top:*",
                         "~rlock_rwlock_writers:{top:*",
                         "~rlock_lock_waiters:{top:*",
                         NULL};
    char *ok = rh_cmd_str(g_srv, acl);
    assert_string_equal(ok, "OK");
    free(ok);
    char url[256];
    snprintf(url, sizeof(url), "redis://viewer:viewer-pw@127.0.0.1:%d", rh_port(g_srv));
    const char *args[] = {"--once", "--json", "top:*", NULL};
    int st = run_top(url, args, "acl", "aclerr");
    print_message("%s%s", ct_slurp("aclerr"), ct_slurp("acl"));
    assert_int_equal(st, 0);
    const char *doc = ct_slurp("acl");
    assert_int_equal(ct_count_of(doc, "{\"name\":"), 7);
    assert_non_null(strstr(object_line(doc, "top:fair"), "\"type\":\"fair\""));
    assert_non_null(strstr(object_line(doc, "top:latch"), "\"type\":\"latch\""));
}

/* docs/acl.md's lock user (for names that start with "top:") plus SCAN: it may run EVALSHA but
 * not EVALSHA_RO, nor PUBSUB NUMSUB, so top reads locks by EVALSHA of the same read-only script
 * and cannot tell who listens (a semaphore or latch shows as a counter, or by its leases). */
static void test_top_lock_user(void **state)
{
    (void)state;
    const char *acl[] = {"ACL",
                         "SETUSER",
                         "locker",
                         "reset",
                         "on",
                         ">locker-pw",
                         "+scan",
                         "+ping",
                         "+evalsha",
                         "+script|load",
                         "+subscribe",
                         "+unsubscribe",
                         "+info",
                         "+wait",
                         "+publish",
                         "+time",
                         "+exists",
                         "+type",
                         "+del",
                         "+get",
                         "+set",
                         "+incr",
                         "+incrby",
                         "+decr",
                         "+decrby",
                         "+pexpire",
                         "+pttl",
                         "+hexists",
                         "+hget",
                         "+hgetall",
                         "+hset",
                         "+hdel",
                         "+hincrby",
                         "+hlen",
                         "+lindex",
                         "+lrange",
                         "+lpop",
                         "+rpop",
                         "+rpush",
                         "+lrem",
                         "+zadd",
                         "+zrem",
                         "+zscore",
                         "+zrange",
                         "+zrangebyscore",
                         "+zremrangebyscore",
                         "~top:*",
                         "~{top:*",
                         "~redisson_lock_token:{top:*",
                         "~redisson_lock_queue:{top:*",
                         "~redisson_lock_timeout:{top:*",
                         "~rlock_rwlock_writers:{top:*",
                         "~rlock_lock_waiters:{top:*",
                         NULL};
    char *ok = rh_cmd_str(g_srv, acl);
    assert_string_equal(ok, "OK");
    free(ok);
    char url[256];
    snprintf(url, sizeof(url), "redis://locker:locker-pw@127.0.0.1:%d", rh_port(g_srv));
    const char *args[] = {"--once", "--json", "top:*", NULL};
    int st = run_top(url, args, "lk", "lkerr");
    print_message("%s", ct_slurp("lkerr"));
    assert_int_equal(st, 0);
    const char *doc = ct_slurp("lk");
    assert_int_equal(ct_count_of(doc, "{\"name\":"), 7);
    const char *l = object_line(doc, "top:fair");
    assert_true(jhas(l, "type", "\"fair\"") && jlen(l, "queue") == 2);
    l = object_line(doc, "top:latch");
    assert_true(jhas(l, "type", "\"counter\"") && jhas(l, "listeners", "null"));
    assert_int_equal(jint(l, "latch_count"), 2);
    l = object_line(doc, "top:leased");
    assert_true(jhas(l, "type", "\"semaphore_leased\"") && jint(l, "permits") == 2);
}

/* Unknown option, bad patterns, two patterns: 2 and one line; no server: 4. */
static void test_top_bad_input(void **state)
{
    (void)state;
    const char *bad[][3] = {
        {"--nope", NULL, NULL}, {"top:[ab", NULL, NULL}, {"", NULL, NULL}, {"a*", "b*", NULL}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run_top(rh_url(g_srv), bad[i], NULL, "err"), 2);
        const char *err = ct_slurp("err");
        assert_true(strncmp(err, "rlock top: ", 11) == 0 && ct_count_of(err, "\n") == 1);
    }
    assert_non_null(strstr(ct_slurp("err"), "at most one PATTERN"));
    const char *once[] = {"--once", NULL};
    assert_int_equal(run_top("redis://127.0.0.1:1", once, NULL, "err"), 4);
    assert_non_null(strstr(ct_slurp("err"), "cannot connect"));
}

/* The terminal's local modes, read through its slave side. */
static tcflag_t pty_lflag(const char *slave)
{
    int fd = open(slave, O_RDWR | O_NOCTTY);
    struct termios t = {0};
    assert_true(fd >= 0 && tcgetattr(fd, &t) == 0);
    close(fd);
    return t.c_lflag;
}

/* Reads the terminal until its output holds want (within 10 s); 1 if it did. */
static int pty_await(int m, const char *want)
{
    static char out[16384];
    size_t n = 0;
    int64_t end = rh_now_ms() + 10000;
    struct pollfd p = {.fd = m, .events = POLLIN};
    while (rh_now_ms() < end) {
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        /* Until the child opens the terminal, reads fail (EIO) at once. */
        ssize_t k = read(m, out + n, sizeof(out) - 1 - n);
        if (k <= 0) {
            rh_sleep_ms(10);
            continue;
        }
        n += (size_t)k;
        out[n] = '\0';
        if (strstr(out, want) != NULL) {
            return 1;
        }
        n = n > sizeof(out) / 2 ? 0 : n; /* keep reading; the screen repeats */
    }
    return 0;
}

/* The live view on a pseudo-terminal: keys read without Enter while it runs, then ended by q
 * (exit 0) or SIGTERM (exit 143) with the terminal's modes put back; as many rows as fit. */
static void live_case(int by_signal)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
    char slave[128];
    snprintf(slave, sizeof(slave), "%s", ptsname(m));
    struct winsize ws = {.ws_row = 8, .ws_col = 200};
    assert_int_equal(ioctl(m, TIOCSWINSZ, &ws), 0);
    tcflag_t cooked = pty_lflag(slave);
    assert_true((cooked & ICANON) && (cooked & ECHO));
    const char *argv[] = {ct_bin, "--url", rh_url(g_srv), "top", "top:*", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int s = setsid() < 0 ? -1 : open(slave, O_RDWR);
        if (s < 0 || dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0) {
            _exit(120);
        }
        execv(ct_bin, (char *const *)argv);
        _exit(127);
    }
    /* 8 lines: the header, 4 rows and a line for the 3 that do not fit. */
    assert_true(pty_await(m, "\n... 3 more (rlock top --once shows all)"));
    /* A second screen: the view refreshes by itself. */
    assert_true(pty_await(m, "WAITERS  TYPE"));
    assert_int_equal(pty_lflag(slave) & (ICANON | ECHO), 0);
    if (by_signal) {
        kill(pid, SIGTERM);
    } else {
        assert_int_equal(write(m, "q", 1), 1);
    }
    assert_int_equal(rh_wait_child(pid, 5000), by_signal ? 143 : 0);
    assert_int_equal(pty_lflag(slave) & (ICANON | ECHO), cooked & (ICANON | ECHO));
    close(m);
}

static void test_top_live_q(void **state)
{
    (void)state;
    live_case(0);
    live_case(1);
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_srv = rh_start(NULL);
    if (g_srv == NULL || ct_dir_init() != 0) {
        return -1;
    }
    rlock_options o;
    tc_options(&o, g_srv);
    g_c = tc_client(&o);
    prepare();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    release_all();
    rlock_client_free(g_c);
    ct_dir_remove();
    rh_free(g_srv);
    return 0;
}

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_top_json),
             cmocka_unit_test(test_top_text), cmocka_unit_test(test_survey_api),
             cmocka_unit_test(test_survey_node_errors), cmocka_unit_test(test_top_readonly_user),
             cmocka_unit_test(test_top_lock_user), cmocka_unit_test(test_top_bad_input),
             cmocka_unit_test(test_top_live_q))
