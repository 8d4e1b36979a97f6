/*
 * Acceptance tests of the rlock command (issue 15): the built binary (argv[1]) is spawned
 * against a real redis-server started by the harness, as a user would run it from a shell.
 * One test per acceptance point; files in a private temp dir carry what the children saw
 * (cli_spawn.h).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "cli_spawn.h"
#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

static rh_server *g_srv;

/* Removes the temp-dir files a and b (what the script writes) and returns the shell script fmt
 * with their paths for its %s, in order (one static buffer: one script at a time). */
static const char *fresh_script(const char *fmt, const char *a, const char *b)
{
    static char script[512];
    const char *pa = ct_path(a), *pb = ct_path(b);
    unlink(pa);
    unlink(pb);
    snprintf(script, sizeof(script), fmt, pa, pb);
    return script;
}

static size_t queue_len(rlock_client *c, const char *name, int holders)
{
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(c, name, &in), RLOCK_OK);
    size_t n = holders ? in->n_holders : in->n_queue;
    rlock_lock_info_free(in);
    return n;
}

static void await_len(rlock_client *c, const char *name, size_t n, int holders)
{
    for (int i = 0; i < 1000 && queue_len(c, name, holders) != n; i++) {
        rh_sleep_ms(10);
    }
    assert_int_equal(queue_len(c, name, holders), n);
}

/* 8 parallel workers, each runs `rlock run` 5 times around read, sleep, write of a counter. */
static void counter_case(const char *kind, const char *name)
{
    FILE *f = fopen(ct_path("counter"), "w");
    fputs("0\n", f);
    fclose(f);
    char script[512];
    snprintf(script, sizeof(script),
             "for i in 1 2 3 4 5; do \"%s\" run -k %s %s -- sh -c "
             "'v=$(cat \"%s\"); sleep 0.01; echo $((v+1)) > \"%s\"' || exit 1; done",
             ct_bin, kind, name, ct_path("counter"), ct_path("counter"));
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    pid_t pids[8];
    for (int i = 0; i < 8; i++) {
        pids[i] = ct_spawn(argv, NULL, NULL);
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rh_wait_child(pids[i], 120000), 0);
    }
    assert_int_equal(atoi(ct_slurp("counter")), 40);
}

static void test_counter_fair(void **state)
{
    (void)state;
    counter_case("fair", "cli:counter:fair");
}

static void test_counter_reentrant(void **state)
{
    (void)state;
    counter_case("reentrant", "cli:counter:re");
}

static void test_exit_status(void **state)
{
    (void)state;
    const char *seven[] = {"rlock", "run", "cli:exit", "--", "/bin/sh", "-c", "exit 7", NULL};
    assert_int_equal(ct_run(seven, NULL, NULL), 7);
    const char *killed[] = {"rlock", "run", "cli:exit", "--", "/bin/sh", "-c", "kill -9 $$", NULL};
    assert_int_equal(ct_run(killed, NULL, NULL), 137);
    const char *missing[] = {"rlock", "run", "cli:exit", "--", "/nonexistent/cmd", NULL};
    assert_int_equal(ct_run(missing, NULL, "err"), 127);
    /* The lock is free again after each run. */
    rlock_client *c = tc_client_defaults(g_srv);
    assert_int_equal(queue_len(c, "cli:exit", 1), 0);
    rlock_client_free(c);
}

static void test_conflict(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_REENTRANT, "cli:busy", &c);
    unlink(ct_path("ran"));
    const char *nb[] = {"rlock", "run", "-n", "cli:busy", "--", "/bin/touch", ct_path("ran"), NULL};
    assert_int_equal(ct_run(nb, NULL, "err"), 1);
    assert_non_null(strstr(ct_slurp("err"), "not acquired"));
    const char *e42[] = {"rlock",    "run", "-n",         "-E",           "42",
                         "cli:busy", "--",  "/bin/touch", ct_path("ran"), NULL};
    assert_int_equal(ct_run(e42, NULL, NULL), 42);
    const char *w[] = {"rlock", "run",        "-w",           "300ms", "cli:busy",
                       "--",    "/bin/touch", ct_path("ran"), NULL};
    int64_t t0 = rh_now_ms();
    assert_int_equal(ct_run(w, NULL, NULL), 1);
    int64_t took = rh_now_ms() - t0;
    assert_true(took >= 300);
    assert_true(took < 5000); /* gave up after its wait, not after the 30 s lease */
    assert_int_equal(access(ct_path("ran"), F_OK), -1); /* nothing ran */
    rlock_unlock(l);
    tc_close_own(l, c);
}

/* `rlock --watchdog-timeout 900ms run OPTIONS... -- sh` (pre: the words from "run" to "--")
 * holds; the key del is deleted behind its back: the watchdog sees the loss, the command gets
 * SIGTERM and rlock exits 3 with a message containing msg. */
static void lost_case(const char *const *pre, int npre, const char *del, const char *msg)
{
    const char *script = fresh_script("trap 'echo TERM > \"%s\"; exit 0' TERM; touch \"%s\"; "
                                      "while :; do sleep 0.05; done",
                                      "term", "started");
    const char *argv[16] = {"rlock", "--watchdog-timeout", "900ms"};
    int n = 3;
    for (int i = 0; i < npre && n < 12; i++) {
        argv[n++] = pre[i];
    }
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n] = NULL;
    pid_t pid = ct_spawn(argv, NULL, "err");
    assert_true(ct_await_file("started"));
    const char *cmd[] = {"DEL", del, NULL};
    assert_int_equal(rh_cmd_int(g_srv, cmd), 1);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rh_wait_child(pid, 30000), 3);
    /* Renewals run every 300 ms: the loss is seen at the next one (slack for a busy host). */
    assert_true(rh_now_ms() - t0 < 300 + 2000);
    assert_non_null(strstr(ct_slurp("term"), "TERM"));
    assert_non_null(strstr(ct_slurp("err"), msg));
}

static void test_lost_lock(void **state)
{
    (void)state;
    const char *pre[] = {"run", "cli:lost", "--"};
    lost_case(pre, 3, "cli:lost", "lost");
}

static void test_sigterm_while_waiting(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_FAIR, "cli:sigterm", &c);
    const char *argv[] = {"rlock", "run", "-k", "fair", "cli:sigterm", "--", "/bin/true", NULL};
    pid_t pid = ct_spawn(argv, NULL, NULL);
    await_len(c, "cli:sigterm", 1, 0);
    kill(pid, SIGTERM);
    assert_int_equal(rh_wait_child(pid, 10000), 143);
    /* Gone from the queue at once, not after the 5 s waiter timeout. */
    assert_int_equal(queue_len(c, "cli:sigterm", 0), 0);
    rlock_unlock(l);
    tc_close_own(l, c);
}

static void test_token_increases(void **state)
{
    (void)state;
    const char *script =
        fresh_script("echo $RLOCK_NAME $RLOCK_TOKEN >> \"%s\"", "tokens", "tokens");
    const char *argv[] = {"rlock", "run", "cli:token", "--", "/bin/sh", "-c", script, NULL};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_run(argv, NULL, NULL), 0);
    }
    char *text = ct_slurp("tokens");
    long long prev = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(strncmp(text, "cli:token ", 10), 0);
        long long t = strtoll(text + 10, &text, 10);
        assert_true(t > prev);
        prev = t;
        text++;
    }
}

static void test_status_reentrant(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_REENTRANT, "cli:st:re", &c);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    const char *argv[] = {"rlock", "status", "--json", "cli:st:re", NULL};
    assert_int_equal(ct_run(argv, "out", NULL), 0);
    char *out = ct_slurp("out");
    char want[160];
    snprintf(want, sizeof(want), "\"holders\":[{\"owner\":\"%s:", rlock_client_id(c));
    assert_non_null(strstr(out, "{\"name\":\"cli:st:re\",\"type\":\"reentrant\",\"locked\":true"));
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "\"count\":2}]"));
    char tok[64];
    snprintf(tok, sizeof(tok), "\"token\":%llu,", (unsigned long long)rlock_token(l));
    assert_non_null(strstr(out, tok));
    assert_non_null(strstr(out, "\"queue\":[],\"mode\":null"));
    const char *text[] = {"rlock", "status", "cli:st:re", "cli:st:none", NULL};
    assert_int_equal(ct_run(text, "out", NULL), 0);
    assert_non_null(strstr(ct_slurp("out"), "cli:st:none: free, not locked"));
    assert_int_equal(rlock_hold_count(l), 2); /* status changed nothing */
    rlock_unlock(l);
    rlock_unlock(l);
    tc_close_own(l, c);
}

static void test_status_fair_queue(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_FAIR, "cli:st:fair", &c);
    unlink(ct_path("order"));
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        char script[128];
        snprintf(script, sizeof(script), "echo %d >> \"%s\"", i + 1, ct_path("order"));
        const char *argv[] = {"rlock", "run",     "-k", "fair", "cli:st:fair",
                              "--",    "/bin/sh", "-c", script, NULL};
        pids[i] = ct_spawn(argv, NULL, NULL);
        await_len(c, "cli:st:fair", (size_t)i + 1, 0);
    }
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(c, "cli:st:fair", &in), RLOCK_OK);
    const char *argv[] = {"rlock", "status", "--json", "cli:st:fair", NULL};
    assert_int_equal(ct_run(argv, "out", NULL), 0);
    char *out = ct_slurp("out");
    assert_non_null(strstr(out, "\"type\":\"fair\",\"locked\":true"));
    assert_int_equal(ct_count_of(out, "\"deadline_ms\":"), 3);
    /* The JSON lists the queue in order: each owner appears after the previous one. */
    const char *at = strstr(out, "\"queue\":[");
    assert_non_null(at);
    for (size_t i = 0; i < in->n_queue; i++) {
        at = strstr(at, in->queue[i].owner);
        assert_non_null(at);
    }
    rlock_lock_info_free(in);
    const char *text[] = {"rlock", "status", "cli:st:fair", NULL};
    assert_int_equal(ct_run(text, "out", NULL), 0);
    assert_non_null(strstr(ct_slurp("out"), "queue 3"));
    rlock_unlock(l);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rh_wait_child(pids[i], 30000), 0);
    }
    assert_string_equal(ct_slurp("order"), "1\n2\n3\n"); /* the queue's order was the real one */
    tc_close_own(l, c);
}

static void test_status_rw_readers(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(g_srv);
    pid_t pids[2];
    const char *argv[] = {"rlock", "run", "-k", "read", "cli:st:rw", "--", "/bin/sleep", "2", NULL};
    for (int i = 0; i < 2; i++) {
        pids[i] = ct_spawn(argv, NULL, NULL);
    }
    await_len(c, "cli:st:rw", 2, 1);
    const char *st[] = {"rlock", "status", "--json", "cli:st:rw", NULL};
    assert_int_equal(ct_run(st, "out", NULL), 0);
    char *out = ct_slurp("out");
    assert_non_null(strstr(out, "\"type\":\"read-write\",\"locked\":true"));
    assert_non_null(strstr(out, "\"mode\":\"read\""));
    assert_int_equal(ct_count_of(out, "\"count\":1}"), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rh_wait_child(pids[i], 30000), 0);
    }
    rlock_client_free(c);
}

/* Keys written the way a Redisson client writes them (its RLock script, its read lock and fair
 * queue layout), with an owner no rlock process has. */
static void test_status_redisson(void **state)
{
    (void)state;
    const char *acquire =
        "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) "
        "== 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], "
        "ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
    const char *owner = "6f1c2b1e-0000-4000-8000-00000000beef:1";
    const char *eval[] = {"EVAL", acquire, "1", "cli:java", "30000", owner, NULL};
    redisReply *r = rh_cmd(g_srv, eval);
    assert_non_null(r);
    freeReplyObject(r);
    const char *q[] = {"RPUSH", "redisson_lock_queue:{cli:java}",
                       "6f1c2b1e-0000-4000-8000-00000000beef:7", NULL};
    rh_cmd_int(g_srv, q);
    const char *z[] = {"ZADD", "redisson_lock_timeout:{cli:java}", "4102444800000",
                       "6f1c2b1e-0000-4000-8000-00000000beef:7", NULL};
    rh_cmd_int(g_srv, z);
    const char *rw[] = {"HSET", "cli:javarw", "mode", "read", owner, "2", NULL};
    rh_cmd_int(g_srv, rw);
    const char *argv[] = {"rlock", "status", "--json", "cli:java", "cli:javarw", NULL};
    assert_int_equal(ct_run(argv, "out", NULL), 0);
    char *out = ct_slurp("out");
    assert_non_null(strstr(out, "{\"name\":\"cli:java\",\"type\":\"fair\",\"locked\":true,"
                                "\"holders\":[{\"owner\":\"6f1c2b1e-0000-4000-8000-00000000beef:"
                                "1\",\"count\":1}]"));
    assert_non_null(strstr(out, "\"queue\":[{\"owner\":\"6f1c2b1e-0000-4000-8000-00000000beef:7"
                                "\",\"deadline_ms\":4102444800000}]"));
    assert_non_null(strstr(out, "{\"name\":\"cli:javarw\",\"type\":\"read-write\",\"locked\":true,"
                                "\"holders\":[{\"owner\":\"6f1c2b1e-0000-4000-8000-00000000beef:"
                                "1\",\"count\":2}],\"ttl_ms\":-1"));
    assert_non_null(strstr(out, "\"mode\":\"read\""));
}

static void test_unlock_force(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_REENTRANT, "cli:force", &c);
    const char *argv[] = {"rlock", "unlock", "--force", "cli:force", "cli:force:free", NULL};
    assert_int_equal(ct_run(argv, "out", NULL), 0);
    char *out = ct_slurp("out");
    assert_non_null(strstr(out, "cli:force: unlocked"));
    assert_non_null(strstr(out, "cli:force:free: not locked"));
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    const char *set[] = {"SET", "cli:notalock", "x", NULL};
    rh_cmd_int(g_srv, set);
    const char *bad[] = {"rlock", "unlock", "--force", "cli:notalock", NULL};
    assert_int_equal(ct_run(bad, NULL, "err"), 4);
    assert_non_null(strstr(ct_slurp("err"), "not a lock"));
    const char *noforce[] = {"rlock", "unlock", "cli:force", NULL};
    assert_int_equal(ct_run(noforce, NULL, NULL), 2);
    tc_close_own(l, c);
}

static void test_errors_and_help(void **state)
{
    (void)state;
    const char *conn[] = {"rlock", "--url", "redis://127.0.0.1:1", "status", "x", NULL};
    assert_int_equal(ct_run(conn, NULL, "err"), 4);
    assert_non_null(strstr(ct_slurp("err"), "rlock: cannot connect to redis://127.0.0.1:1: "));
    assert_non_null(strstr(ct_slurp("err"), "refused"));
    /* A URL with a password: the message hides the user information. */
    const char *secret[] = {"rlock",  "--url", "redis://u:Secr3tPw@127.0.0.1:1",
                            "status", "x",     NULL};
    assert_int_equal(ct_run(secret, NULL, "err"), 4);
    assert_non_null(strstr(ct_slurp("err"), "rlock: cannot connect to redis://***@127.0.0.1:1: "));
    assert_null(strstr(ct_slurp("err"), "Secr3tPw"));
    const char *cmds[][4] = {{"rlock", "--help", NULL},
                             {"rlock", "run", "--help", NULL},
                             {"rlock", "status", "--help", NULL},
                             {"rlock", "unlock", "--help", NULL}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ct_run(cmds[i], "out", NULL), 0);
        assert_non_null(strstr(ct_slurp("out"), "usage: rlock"));
    }
    assert_non_null(strstr(ct_slurp("out"), "Exit"));
    const char *bad[][8] = {{"rlock", NULL},
                            {"rlock", "frob", NULL},
                            {"rlock", "run", "x", NULL},
                            {"rlock", "run", "-w", "5d", "x", "--", "/bin/true", NULL},
                            {"rlock", "run", "-k", "odd", "x", "--", "/bin/true", NULL},
                            {"rlock", "run", "--kill-signal", "NOPE", "x", "--", "/bin/true"}};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ct_run(bad[i], NULL, NULL), 2);
    }
}

/* The most lines "+" minus "-" ever counted in the log (each command writes "+" after taking its
 * permit and "-" before giving it back, so the file's order is the order of the holds). */
static int max_inside(const char *log, int *entries)
{
    int inside = 0, most = 0;
    *entries = 0;
    for (const char *p = log; *p != '\0'; p++) {
        if (*p == '+') {
            (*entries)++;
            most = ++inside > most ? inside : most;
        } else if (*p == '-') {
            inside--;
        }
    }
    return most;
}

/* Issue 16: 6 commands under `rlock run --semaphore 2` never run more than 2 at once, do run 2
 * at once, and all exit 0; afterwards both permits are back and status shows them. */
static void test_semaphore_at_most_n(void **state)
{
    (void)state;
    const char *script =
        fresh_script("echo \"+ $RLOCK_NAME $RLOCK_PERMIT_ID\" >> \"%s\"; sleep 0.3; "
                     "echo \"- $RLOCK_PERMIT_ID\" >> \"%s\"",
                     "semlog", "semlog");
    const char *argv[] = {"rlock", "run",     "--semaphore", "2",    "cli:sem",
                          "--",    "/bin/sh", "-c",          script, NULL};
    pid_t pids[6];
    for (int i = 0; i < 6; i++) {
        pids[i] = ct_spawn(argv, NULL, NULL);
    }
    for (int i = 0; i < 6; i++) {
        assert_int_equal(rh_wait_child(pids[i], 60000), 0);
    }
    const char *log = ct_slurp("semlog");
    int entries = 0;
    int most = max_inside(log, &entries);
    print_message("6 commands, at most %d inside at once\n", most);
    assert_int_equal(entries, 6);
    assert_int_equal(ct_count_of(log, "-"), 6);
    assert_int_equal(most, 2);
    assert_int_equal(ct_count_of(log, "+ cli:sem "), 6);
    const char *id = strstr(log, "+ cli:sem ") + strlen("+ cli:sem ");
    assert_int_equal(strspn(id, "0123456789abcdef"), RLOCK_PERMIT_ID_LEN);
    const char *st[] = {"rlock", "status", "--semaphore", "cli:sem", NULL};
    assert_int_equal(ct_run(st, "out", NULL), 0);
    assert_string_equal(ct_slurp("out"), "cli:sem: semaphore, 2 permit(s) available\n");
    const char *as_lock[] = {"rlock", "status", "cli:sem", NULL};
    assert_int_equal(ct_run(as_lock, NULL, "err"), 4);
    assert_non_null(strstr(ct_slurp("err"), "try rlock status --semaphore cli:sem"));
}

/* With every permit taken, -n and -w give up with 1 (or -E) and run nothing; status shows 0;
 * bad semaphore options are usage errors. */
static void test_semaphore_busy(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(g_srv);
    rlock_semaphore *s = rlock_semaphore_open(c, "cli:sem:busy");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 1), 1);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_OK);
    unlink(ct_path("ran"));
    const char *nb[] = {"rlock",        "run", "-n",         "--semaphore",  "1",
                        "cli:sem:busy", "--",  "/bin/touch", ct_path("ran"), NULL};
    assert_int_equal(ct_run(nb, NULL, "err"), 1);
    assert_non_null(strstr(ct_slurp("err"), "not acquired"));
    const char *w[] = {"rlock",      "run",          "-w", "300ms",        "-E",
                       "9",          "--semaphore",  "1",  "cli:sem:busy", "--",
                       "/bin/touch", ct_path("ran"), NULL};
    int64_t t0 = rh_now_ms();
    assert_int_equal(ct_run(w, NULL, NULL), 9);
    assert_true(rh_now_ms() - t0 >= 300);
    assert_int_equal(access(ct_path("ran"), F_OK), -1);
    const char *st[] = {"rlock", "status", "--json", "--semaphore", "cli:sem:busy", NULL};
    assert_int_equal(ct_run(st, "out", NULL), 0);
    assert_string_equal(ct_slurp("out"),
                        "{\"name\":\"cli:sem:busy\",\"type\":\"semaphore\",\"available\":0}\n");
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    assert_int_equal(ct_run(nb, NULL, NULL), 0);
    assert_int_equal(access(ct_path("ran"), F_OK), 0);
    /* 9 slots: the last row has 8 words and needs its NULL (with 8, execv read past it). */
    const char *bad[][9] = {{"rlock", "run", "--semaphore", "0", "x", "--", "/bin/true", NULL},
                            {"rlock", "run", "--semaphore", "2x", "x", "--", "/bin/true", NULL},
                            {"rlock", "run", "-k", "fair", "--semaphore", "2", "x", "--"}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_run(bad[i], NULL, NULL), 2);
    }
    /* --lease: a fixed lease, not renewed; it runs out under a longer command, which is
     * signalled then (exit 3), and the permit is back in the semaphore. */
    const char *lease[] = {"rlock",        "run", "--lease",    "200ms", "--semaphore", "1",
                           "cli:sem:busy", "--",  "/bin/sleep", "1",     NULL};
    assert_int_equal(ct_run(lease, NULL, "err"), 3);
    assert_non_null(strstr(ct_slurp("err"), "permit's --lease ended while the command ran"));
    assert_int_equal(rlock_semaphore_available(s), 1);
    rlock_semaphore_free(s);
    rlock_client_free(c);
}

/* A permit removed behind the command's back (its lease zset deleted): the watchdog finds it
 * gone, the command gets SIGTERM and rlock exits 3. */
static void test_semaphore_lost(void **state)
{
    (void)state;
    const char *pre[] = {"run", "--semaphore", "1", "cli:sem:lost", "--"};
    lost_case(pre, 5, "{cli:sem:lost}:timeout", "permit was lost");
}

/* Spawns `rlock run PRE... -- touch ran` (pre up to "NAME"), waits until it listens on channel,
 * sends SIGINT and checks that it exits 130 promptly without running the command. */
static void sigint_case(const char *const *pre, int npre, const char *channel)
{
    unlink(ct_path("ran"));
    const char *argv[16] = {"rlock", "run"};
    int n = 2;
    for (int i = 0; i < npre && n < 12; i++) {
        argv[n++] = pre[i];
    }
    argv[n++] = "--";
    argv[n++] = "/bin/touch";
    argv[n++] = ct_path("ran");
    argv[n] = NULL;
    pid_t pid = ct_spawn(argv, NULL, "err");
    assert_true(tc_wait_listeners(g_srv, channel, 1, 10000));
    int64_t t0 = rh_now_ms();
    kill(pid, SIGINT);
    assert_int_equal(rh_wait_child(pid, 10000), 130);
    assert_true(rh_now_ms() - t0 < 2000);
    assert_int_equal(access(ct_path("ran"), F_OK), -1);
    assert_true(tc_wait_listeners(g_srv, channel, 0, 5000));
}

/* SIGINT to a waiting `rlock run` (its cancellation token): the wait ends with exit 130 and Redis
 * is as before it came: the semaphore's one permit still the holder's and none of rlock's; the
 * lock held by its holder alone with nobody queued. */
static void test_sigint_while_waiting(void **state)
{
    (void)state;
    rlock_client *c = tc_client_defaults(g_srv);
    rlock_semaphore *s = rlock_semaphore_open(c, "cli:sigint");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, id), RLOCK_OK);
    const char *sem[] = {"--semaphore", "1", "cli:sigint"};
    sigint_case(sem, 3, "redisson_sc:{cli:sigint}");
    assert_int_equal(rlock_semaphore_acquired(s), 1);
    assert_int_equal(rlock_semaphore_available(s), 0);
    const char *zcard[] = {"ZCARD", "{cli:sigint}:timeout", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zcard), 1);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 1);
    rlock_semaphore_free(s);
    rlock *l = tc_hold(c, RLOCK_REENTRANT, "cli:sigint:lock");
    const char *lock[] = {"cli:sigint:lock"};
    sigint_case(lock, 1, "redisson_lock__channel:{cli:sigint:lock}");
    assert_int_equal(queue_len(c, "cli:sigint:lock", 1), 1);
    assert_int_equal(queue_len(c, "cli:sigint:lock", 0), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(queue_len(c, "cli:sigint:lock", 1), 0);
    rlock_free(l);
    rlock_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_srv = rh_start(NULL);
    if (g_srv == NULL || ct_dir_init() != 0) {
        return -1;
    }
    /* Children find the server through the environment, as a user's shell would. */
    setenv("RLOCK_URL", rh_url(g_srv), 1);
    unsetenv("RLOCK_WATCHDOG_TIMEOUT");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ct_dir_remove();
    rh_free(g_srv);
    return 0;
}

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_counter_fair),
             cmocka_unit_test(test_counter_reentrant), cmocka_unit_test(test_exit_status),
             cmocka_unit_test(test_conflict), cmocka_unit_test(test_lost_lock),
             cmocka_unit_test(test_sigterm_while_waiting), cmocka_unit_test(test_token_increases),
             cmocka_unit_test(test_status_reentrant), cmocka_unit_test(test_status_fair_queue),
             cmocka_unit_test(test_status_rw_readers), cmocka_unit_test(test_status_redisson),
             cmocka_unit_test(test_unlock_force), cmocka_unit_test(test_errors_and_help),
             cmocka_unit_test(test_semaphore_at_most_n), cmocka_unit_test(test_semaphore_busy),
             cmocka_unit_test(test_semaphore_lost), cmocka_unit_test(test_sigint_while_waiting))
