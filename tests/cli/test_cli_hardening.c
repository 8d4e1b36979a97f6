/*
 * The rlock command's hardening (issue 26, section 5): no password in any message, one-line
 * usage errors, the command's whole process group signalled when the lock is lost, a --lease
 * enforced when it ends, a declared-normal skip kept silent, and waiters shown by status; and
 * that a command in its own process group still reads its terminal. The built binary (argv[1])
 * runs against a real redis-server, as a user would run it.
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
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "cli_spawn.h"
#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

static rh_server *g_srv;

/* Runs `rlock status n1` with the URL in $RLOCK_URL and again with --url; both must exit want
 * and print no "Secret2" (a malformed URL exits 2 with a one-line error). */
static void url_case(const char *url, int want)
{
    setenv("RLOCK_URL", url, 1);
    const char *env[] = {"rlock", "status", "n1", NULL};
    int rc = ct_run(env, NULL, "err");
    setenv("RLOCK_URL", rh_url(g_srv), 1);
    print_message("%s -> %d: %s", url, rc, ct_slurp("err"));
    assert_int_equal(rc, want);
    assert_null(strstr(ct_slurp("err"), "Secret2"));
    const char *opt[] = {"rlock", "--url", url, "status", "n1", NULL};
    assert_int_equal(ct_run(opt, NULL, "err"), want);
    const char *err = ct_slurp("err");
    assert_null(strstr(err, "Secret2"));
    if (want == 2) {
        assert_int_equal(ct_count_of(err, "\n"), 1);
        assert_non_null(strstr(err, "(try rlock --help)"));
    } else {
        assert_non_null(strstr(err, "***@"));
    }
}

static void test_password_never_shown(void **state)
{
    (void)state;
    /* Characters a password may hold that end the authority: the URL is malformed (exit 2). */
    const char *malformed[] = {"redis://:Pw#Secret2@127.0.0.1:1",
                               "redis://:Pw/Secret2@127.0.0.1:1",
                               "redis://:Pw?Secret2@127.0.0.1:1",
                               "redis://:Pw@Secret2@127.0.0.1:1",
                               "redis://user:Pw#Secret2@127.0.0.1:1",
                               "redis://user:P/w?Secret2#x@127.0.0.1:1",
                               "rediss://:Pw#Secret2@127.0.0.1:1",
                               "redis-sentinel://:Pw/Secret2@127.0.0.1:1#mymaster",
                               "redis-cluster://user:Pw?Secret2@127.0.0.1:1",
                               "unix://:Pw#Secret2@/tmp/rlock-none.sock"};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        url_case(malformed[i], 2);
    }
    /* Well-formed (':' is allowed, the others percent-encoded): refused, exit 4, user
     * information hidden. */
    const char *refused[] = {
        "redis://:Pw%23Secret2@127.0.0.1:1", "redis://user:Pw:Secret2@127.0.0.1:1",
        "redis://user:Pw%2F%3F%40%23Secret2@127.0.0.1:1", "redis-cluster://:Pw:Secret2@127.0.0.1:1",
        "unix://:Pw:Secret2@/tmp/rlock-none.sock"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        url_case(refused[i], 4);
    }
}

/* Each bad command line exits 2 with one line naming what is wrong, runs nothing and prints
 * no help text. */
static void test_usage_one_line(void **state)
{
    (void)state;
    char ran[128]; /* ct_path()'s buffers are reused by the runs */
    snprintf(ran, sizeof(ran), "%s", ct_path("ran"));
    const struct {
        const char *argv[10];
        const char *says;
    } cases[] = {
        {{"rlock", "unlock", "u:x", NULL}, "--force is required"},
        {{"rlock", "run", "u:x", "--", NULL}, "missing COMMAND after '--'"},
        {{"rlock", "run", "--", "/bin/touch", ran, NULL}, "missing NAME before '--'"},
        {{"rlock", "run", "u:x", "/bin/touch", ran, NULL}, "missing '--' between NAME"},
        {{"rlock", "run", "u:x", "-w", "1s", "--", "/bin/touch", ran, NULL},
         "option '-w' after NAME"},
        {{"rlock", "run", "u:x", NULL}, "missing '-- COMMAND'"},
        {{"rlock", "run", "--bogus", "u:x", "--", "/bin/touch", ran, NULL},
         "unknown option '--bogus'"},
        {{"rlock", "run", "-w", NULL}, "option '-w' needs a value"},
        {{"rlock", "run", "-w", "5d", "u:x", "--", "/bin/touch", ran, NULL}, "bad wait '5d'"},
        {{"rlock", "status", "u:x", "--json", NULL}, "option '--json' after NAME"},
        {{"rlock", "status", NULL}, "missing NAME"},
        {{"rlock", "unlock", "--force", NULL}, "missing NAME"},
        {{"rlock", NULL}, "missing COMMAND"},
        {{"rlock", "frob", NULL}, "unknown command 'frob'"},
        {{"rlock", "--nope", "status", "u:x", NULL}, "unknown option '--nope'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unlink(ran);
        assert_int_equal(ct_run(cases[i].argv, "out", "err"), 2);
        const char *err = ct_slurp("err");
        print_message("%s", err);
        assert_non_null(strstr(err, cases[i].says));
        assert_int_equal(ct_count_of(err, "\n"), 1);
        assert_non_null(strstr(err, " --help)\n"));
        assert_null(strstr(err, "usage:"));
        assert_string_equal(ct_slurp("out"), "");
        assert_int_equal(access(ran, F_OK), -1);
    }
    /* After "--" a name may begin with '-'. */
    const char *odd[] = {"rlock", "status", "--", "-u:odd", NULL};
    assert_int_equal(ct_run(odd, "out", NULL), 0);
    assert_non_null(strstr(ct_slurp("out"), "-u:odd: free, not locked"));
    const char *odd_run[] = {"rlock", "run", "--", "-u:odd", "--", "/bin/touch", ran, NULL};
    assert_int_equal(ct_run(odd_run, NULL, NULL), 0);
    assert_int_equal(access(ran, F_OK), 0);
}

/* 1 while pid runs (a zombie, or no process, does not). */
static int alive(pid_t pid)
{
    char p[64], buf[256];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *end = strrchr(buf, ')');
    return end != NULL && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

/* `rlock run` of a shell that starts a grandchild (sleep 60) and waits; the lock's key is
 * deleted; rlock must exit 3 and the grandchild must be gone within 2 s. pre: the shell's
 * first words (a trap), grace: --grace. */
static void group_case(const char *name, const char *pre, const char *grace)
{
    char script[512];
    unlink(ct_path("started"));
    snprintf(script, sizeof(script), "%s sleep 60 & echo $! > '%s'; touch '%s'; wait", pre,
             ct_path("gc"), ct_path("started"));
    const char *argv[] = {"rlock",   "--watchdog-timeout",
                          "900ms",   "run",
                          "--grace", grace,
                          name,      "--",
                          "/bin/sh", "-c",
                          script,    NULL};
    pid_t pid = ct_spawn(argv, NULL, "err");
    assert_true(ct_await_file("started"));
    pid_t gc = (pid_t)atoi(ct_slurp("gc"));
    assert_true(gc > 0 && alive(gc));
    const char *del[] = {"DEL", name, NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    assert_int_equal(rh_wait_child(pid, 30000), 3);
    for (int i = 0; i < 200 && alive(gc); i++) {
        rh_sleep_ms(10);
    }
    int left = alive(gc);
    kill(gc, SIGKILL); /* The test's own cleanup when it fails. */
    assert_false(left);
    assert_non_null(strstr(ct_slurp("err"), "lock was lost"));
}

static void test_group_signalled(void **state)
{
    (void)state;
    group_case("u:group", "", "10s");
    /* A group that ignores the kill signal gets SIGKILL after --grace, grandchild included. */
    group_case("u:group:grace", "trap '' TERM;", "300ms");
}

/* rlock run on the controlling terminal of a new session (a pseudo-terminal), as from an
 * interactive shell: the command's group is given the terminal, so it reads its input there
 * (a background group would be stopped by SIGTTIN). Returns the terminal's output. */
static const char *on_terminal(const char *const *argv, const char *input)
{
    static char out[4096];
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
    const char *slave = ptsname(m);
    assert_non_null(slave);
    pid_t pid = fork();
    if (pid == 0) {
        int s = setsid() < 0 ? -1 : open(slave, O_RDWR); /* Becomes the controlling tty. */
        if (s < 0 || dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0) {
            _exit(120);
        }
        execv(ct_bin, (char *const *)argv);
        _exit(127);
    }
    assert_true(write(m, input, strlen(input)) == (ssize_t)strlen(input));
    size_t n = 0;
    struct pollfd p = {.fd = m, .events = POLLIN};
    int64_t end = rh_now_ms() + 20000;
    while (n + 1 < sizeof(out) && rh_now_ms() < end) {
        int ready = poll(&p, 1, 100);
        if (ready < 0) {
            break;
        }
        if (ready == 0) {
            continue;
        }
        /* POLLHUP may come with the last output still unread: read until the terminal, drained
         * after its last writer closed it, answers EIO (or 0). */
        ssize_t k = read(m, out + n, sizeof(out) - 1 - n);
        if (k <= 0) {
            break;
        }
        n += (size_t)k;
    }
    out[n] = '\0';
    assert_int_equal(rh_wait_child(pid, 5000), 0);
    close(m);
    return out;
}

static void test_terminal_handed_over(void **state)
{
    (void)state;
    const char *argv[] = {
        "rlock", "run",     "-q", "u:tty",
        "--",    "/bin/sh", "-c", "read a; echo \"got $a\"; stty size >/dev/null && echo tty-ok",
        NULL};
    const char *out = on_terminal(argv, "hello\n");
    print_message("%s", out);
    assert_non_null(strstr(out, "got hello"));
    assert_non_null(strstr(out, "tty-ok"));
}

/* `rlock run --lease 1s ... -- sleep 3` (pre: the words before NAME) is signalled when the lease
 * ends: exit 3 after about 1 s, not 3 s. */
static void lease_case(const char *const *pre, int npre, const char *name, const char *msg)
{
    const char *argv[16] = {"rlock", "run", "--lease", "1s"};
    int n = 4;
    for (int i = 0; i < npre; i++) {
        argv[n++] = pre[i];
    }
    argv[n++] = name;
    argv[n++] = "--";
    argv[n++] = "/bin/sleep";
    argv[n++] = "3";
    argv[n] = NULL;
    int64_t t0 = rh_now_ms();
    assert_int_equal(ct_run(argv, NULL, "err"), 3);
    int64_t took = rh_now_ms() - t0;
    print_message("%s: exit 3 after %lld ms\n", name, (long long)took);
    assert_true(took >= 1000);
    assert_true(took < 2500);
    assert_non_null(strstr(ct_slurp("err"), msg));
}

static void test_lease_enforced(void **state)
{
    (void)state;
    lease_case(NULL, 0, "u:lease",
               "lock's --lease ended while the command ran; it was sent "
               "SIGTERM");
    const char *sem[] = {"--semaphore", "1", "--kill-signal", "INT"};
    lease_case(sem, 4, "u:lease:sem",
               "permit's --lease ended while the command ran; it was "
               "sent SIGINT");
    /* Both are free again: the lease ran out on Redis too. */
    const char *argv[] = {"rlock", "status", "u:lease", NULL};
    assert_int_equal(ct_run(argv, "out", NULL), 0);
    assert_non_null(strstr(ct_slurp("out"), "not locked"));
    const char *sem_st[] = {"rlock", "status", "--semaphore", "u:lease:sem", NULL};
    assert_int_equal(ct_run(sem_st, "out", NULL), 0);
    assert_string_equal(ct_slurp("out"), "u:lease:sem: semaphore, 1 permit(s) available\n");
}

/* A skip the user declared normal (-E 0) or asked to be quiet about (-q) prints nothing. */
static void test_skip_silent(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, RLOCK_REENTRANT, "u:skip", &c);
    char ran[128]; /* ct_path()'s buffers are reused by the runs */
    snprintf(ran, sizeof(ran), "%s", ct_path("ran"));
    unlink(ran);
    const struct {
        const char *argv[12];
        int exit;
        int quiet;
    } cases[] = {
        {{"rlock", "run", "-n", "-E", "0", "u:skip", "--", "/bin/touch", ran, NULL}, 0, 1},
        {{"rlock", "run", "-w", "200ms", "-E", "0", "u:skip", "--", "/bin/touch", ran, NULL}, 0, 1},
        {{"rlock", "-q", "run", "-n", "u:skip", "--", "/bin/touch", ran, NULL}, 1, 1},
        {{"rlock", "run", "-q", "-n", "-E", "5", "u:skip", "--", "/bin/touch", ran, NULL}, 5, 1},
        {{"rlock", "run", "-n", "u:skip", "--", "/bin/touch", ran, NULL}, 1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(ct_run(cases[i].argv, "out", "err"), cases[i].exit);
        const char *err = ct_slurp("err");
        if (cases[i].quiet) {
            assert_string_equal(err, "");
        } else {
            assert_non_null(strstr(err, "u:skip: not acquired (busy)"));
        }
        assert_string_equal(ct_slurp("out"), "");
        assert_int_equal(access(ran, F_OK), -1);
    }
    rlock_unlock(l);
    tc_close_own(l, c);
}

/* The first member of the zset key (NULL when it is empty), as a malloc()ed string. */
static char *first_member(const char *key)
{
    const char *argv[] = {"ZRANGE", key, "0", "0", NULL};
    for (int i = 0; i < 500; i++) {
        redisReply *r = rh_cmd(g_srv, argv);
        char *m = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1
                      ? strdup(r->element[0]->str)
                      : NULL;
        freeReplyObject(r);
        if (m != NULL) {
            return m;
        }
        rh_sleep_ms(10);
    }
    return NULL;
}

/* A lock held here, `rlock run` (kind) waiting for it: status shows the waiter as text
 * (line) and JSON (key), read from the zset key where the waiter records itself. */
static void waiter_case(rlock_kind held, const char *kind, const char *name, const char *key,
                        const char *line, const char *json_key)
{
    rlock_client *c;
    rlock *l = tc_hold_own(g_srv, held, name, &c);
    const char *argv[] = {"rlock", "run", "-k", kind, name, "--", "/bin/true", NULL};
    pid_t pid = ct_spawn(argv, NULL, NULL);
    char *owner = first_member(key);
    assert_non_null(owner);
    char want[256];
    const char *text[] = {"rlock", "status", name, NULL};
    assert_int_equal(ct_run(text, "out", NULL), 0);
    snprintf(want, sizeof(want), "%s%s  deadline in ", line, owner);
    print_message("%s", ct_slurp("out"));
    assert_non_null(strstr(ct_slurp("out"), want));
    const char *json[] = {"rlock", "status", "--json", name, NULL};
    assert_int_equal(ct_run(json, "out", NULL), 0);
    snprintf(want, sizeof(want), "\"%s\":[{\"owner\":\"%s\",\"deadline_ms\":", json_key, owner);
    assert_non_null(strstr(ct_slurp("out"), want));
    free(owner);
    rlock_unlock(l);
    assert_int_equal(rh_wait_child(pid, 30000), 0);
    tc_close_own(l, c);
}

static void test_status_waiters(void **state)
{
    (void)state;
    waiter_case(RLOCK_REENTRANT, "reentrant", "u:st:re", "rlock_lock_waiters:{u:st:re}",
                "  waiting  ", "waiters");
    waiter_case(RLOCK_READ, "write", "u:st:rw", "rlock_rwlock_writers:{u:st:rw}",
                "  waiting writer  ", "writers");
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

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_password_never_shown),
             cmocka_unit_test(test_usage_one_line), cmocka_unit_test(test_group_signalled),
             cmocka_unit_test(test_lease_enforced), cmocka_unit_test(test_skip_silent),
             cmocka_unit_test(test_status_waiters), cmocka_unit_test(test_terminal_handed_over))
