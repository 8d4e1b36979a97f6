/*
 * Self-test of the redis harness against real redis-server processes.
 *
 * Besides the plain API checks, the crash tests re-run this program as a child in a "--child
 * MODE FD" mode that starts a server, reports "PID DIR" on FD and then dies in the way MODE
 * says. The parent then proves that the server PID is gone within 2 s. For the modes that test
 * the atexit and signal handlers, the child runs with RH_HARNESS_NO_PDEATHSIG=1, so that the
 * kernel's parent-death signal cannot do the handlers' work for them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "redis_harness.h"
#include "tc_redis.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers.                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* 1 if a fresh connection gets the expected PONG. */
static int pings(const rh_server *s)
{
    redisContext *c = rh_connect(s);
    if (c == NULL) {
        return 0;
    }
    redisReply *r = redisCommand(c, "PING");
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

/* Waits until pid no longer exists. The test process is a child subreaper (see main), so a
 * server orphaned by a dead child is re-parented to us and has to be reaped here before
 * kill(pid, 0) can report ESRCH. */
static int pid_gone_within(pid_t pid, int64_t ms)
{
    int64_t deadline = rh_now_ms() + ms;
    for (;;) {
        waitpid(pid, NULL, WNOHANG);
        if (kill(pid, 0) == -1 && errno == ESRCH) {
            return 1;
        }
        if (rh_now_ms() >= deadline) {
            return 0;
        }
        rh_sleep_ms(10);
    }
}

static int dir_exists(const char *dir)
{
    struct stat st;
    return stat(dir, &st) == 0;
}

/* Removes a directory that holds only files, as a server's temp dir does. */
static void remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                unlinkat(dirfd(d), e->d_name, 0);
            }
        }
        closedir(d);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------------------------------ */
/* Basic server control.                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void test_two_servers(void **state)
{
    (void)state;
    rh_server *a = rh_start(NULL);
    rh_server *b = rh_start(NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_not_equal(rh_port(a), rh_port(b));
    assert_int_not_equal(rh_port(a), 6379);
    assert_true(rh_pid(a) > 0);
    assert_true(rh_pid(b) > 0);
    assert_true(pings(a));
    assert_true(pings(b));

    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rh_port(a));
    assert_string_equal(rh_url(a), url);

    /* The two data sets are separate servers, not two views of one. */
    const char *set[] = {"SET", "k", "a", NULL};
    char *ok = rh_cmd_str(a, set);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
    const char *dbsize[] = {"DBSIZE", NULL};
    assert_int_equal(rh_cmd_int(a, dbsize), 1);
    assert_int_equal(rh_cmd_int(b, dbsize), 0);

    char dir[256];
    snprintf(dir, sizeof(dir), "%s", rh_dir(a));
    pid_t pid = rh_pid(a);
    assert_true(dir_exists(dir));
    rh_free(a);
    assert_false(dir_exists(dir));
    assert_true(pid_gone_within(pid, 0));
    rh_free(b);
    rh_free(NULL);
}

static void test_pause_resume(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    redisContext *c = rh_connect(s);
    assert_non_null(c);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 300L * 1000};
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);

    assert_int_equal(rh_pause(s), 0);
    assert_int_equal(rh_pause(s), 0); /* Idempotent: must not block on a second stop report. */
    int64_t t0 = rh_now_ms();
    redisReply *r = redisCommand(c, "PING");
    int64_t took = rh_now_ms() - t0;
    assert_null(r);
    assert_int_equal(c->err, REDIS_ERR_IO);
    assert_true(took >= 250);
    assert_true(took < 2000);
    redisFree(c);

    assert_int_equal(rh_resume(s), 0);
    assert_true(pings(s));
    rh_free(s);
}

static void test_free_while_paused(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    pid_t pid = rh_pid(s);
    assert_int_equal(rh_pause(s), 0);
    rh_free(s);
    assert_true(pid_gone_within(pid, 0));
}

static void test_stop_restart(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    int port = rh_port(s);
    pid_t old = rh_pid(s);
    const char *set[] = {"SET", "gone", "soon", NULL};
    free(rh_cmd_str(s, set));
    const char *dbsize[] = {"DBSIZE", NULL};
    assert_int_equal(rh_cmd_int(s, dbsize), 1);

    assert_int_equal(rh_stop(s), 0);
    assert_int_equal(rh_pid(s), 0);
    assert_true(pid_gone_within(old, 0));
    assert_int_equal(rh_stop(s), -1);
    struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(c);
    assert_int_not_equal(c->err, 0);
    assert_non_null(strstr(c->errstr, "refused"));
    redisFree(c);
    assert_int_equal(rh_cmd_int(s, dbsize), -1);

    /* While stopped the port stays reserved: an ordinary bind() cannot take it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), -1);
    assert_int_equal(errno, EADDRINUSE);
    close(fd);

    assert_int_equal(rh_restart(s), 0);
    assert_int_equal(rh_port(s), port);
    assert_true(rh_pid(s) > 0);
    assert_int_not_equal(rh_pid(s), old);
    assert_true(pings(s));
    assert_int_equal(rh_cmd_int(s, dbsize), 0);
    const char *get[] = {"GET", "gone", NULL};
    assert_null(rh_cmd_str(s, get));

    /* Restarting a running server also works, and the cached admin connection recovers. */
    assert_int_equal(rh_restart(s), 0);
    assert_int_equal(rh_port(s), port);
    assert_int_equal(rh_cmd_int(s, dbsize), 0);

    /* A server killed behind the harness's back: the stale cached connection is retried. */
    kill(rh_pid(s), SIGKILL);
    waitpid(rh_pid(s), NULL, 0);
    assert_int_equal(rh_cmd_int(s, dbsize), -1);
    assert_int_equal(rh_restart(s), 0);
    assert_int_equal(rh_cmd_int(s, dbsize), 0);
    rh_free(s);
}

static void test_requirepass(void **state)
{
    (void)state;
    const char *args[] = {"--requirepass", "s3cret", NULL};
    rh_server *s = rh_start(args);
    assert_non_null(s);
    assert_string_equal(rh_password(s), "s3cret");

    redisContext *c = rh_connect_noauth(s);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "PING");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_true(strncmp(r->str, "NOAUTH", 6) == 0);
    freeReplyObject(r);
    redisFree(c);

    assert_true(pings(s)); /* rh_connect authenticates. */
    const char *dbsize[] = {"DBSIZE", NULL};
    assert_int_equal(rh_cmd_int(s, dbsize), 0);

    /* The password survives a restart. */
    assert_int_equal(rh_restart(s), 0);
    assert_int_equal(rh_cmd_int(s, dbsize), 0);
    rh_free(s);

    /* A config the server rejects makes rh_start fail cleanly instead of hanging or retrying. */
    const char *bad[] = {"--no-such-option", "1", NULL};
    int64_t t0 = rh_now_ms();
    assert_null(rh_start(bad));
    assert_true(rh_now_ms() - t0 < 3000);
}

static void test_cmdstat(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    const char *set[] = {"SET", "k", "v", NULL};
    free(rh_cmd_str(s, set));
    assert_int_equal(rh_reset_stats(s), 0);
    assert_int_equal(rh_cmdstat_calls(s, "set"), 0);
    for (int i = 0; i < 3; i++) {
        char *ok = rh_cmd_str(s, set);
        assert_non_null(ok);
        free(ok);
    }
    assert_int_equal(rh_cmdstat_calls(s, "set"), 3);
    assert_int_equal(rh_cmdstat_calls(s, "SET"), 3);
    assert_true(rh_cmdstat_usec_per_call(s, "set") >= 0.0);
    assert_int_equal(rh_cmdstat_calls(s, "hset"), 0);

    const char *incr[] = {"INCR", "n", NULL};
    assert_int_equal(rh_cmd_int(s, incr), 1);
    assert_int_equal(rh_cmd_int(s, incr), 2);
    assert_int_equal(rh_cmdstat_calls(s, "incr"), 2);

    /* A bulk string holding an integer converts; anything else is -1. */
    const char *hset[] = {"HSET", "h", "f", "5", NULL};
    assert_int_equal(rh_cmd_int(s, hset), 1);
    const char *hget[] = {"HGET", "h", "f", NULL};
    assert_int_equal(rh_cmd_int(s, hget), 5);
    const char *get[] = {"GET", "k", NULL};
    assert_int_equal(rh_cmd_int(s, get), -1);
    const char *nil[] = {"GET", "missing", NULL};
    assert_int_equal(rh_cmd_int(s, nil), -1);
    assert_int_equal(rh_cmd_int(s, set), -1);
    const char *bogus[] = {"NOSUCHCOMMAND", NULL};
    assert_int_equal(rh_cmd_int(s, bogus), -1);

    assert_int_equal(rh_reset_stats(s), 0);
    assert_int_equal(rh_cmdstat_calls(s, "incr"), 0);
    rh_free(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Forked children.                                                                            */
/* ------------------------------------------------------------------------------------------ */

static int child_return_7(void *arg)
{
    (void)arg;
    return 7;
}

static int child_abort(void *arg)
{
    (void)arg;
    abort();
}

static int child_sleep(void *arg)
{
    (void)arg;
    rh_sleep_ms(10000);
    return 0;
}

/* exit() runs the inherited atexit handler, which must leave the parent's servers alone. */
static int child_exit_after_incr(void *arg)
{
    rh_server *s = arg;
    const char *incr[] = {"INCR", "from_child", NULL};
    long long v = rh_cmd_int(s, incr);
    exit(v == 1 ? 0 : 1);
}

static void test_fork_child(void **state)
{
    (void)state;
    pid_t pid = rh_fork_child(child_return_7, NULL);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 5000), 7);

    pid = rh_fork_child(child_abort, NULL);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 5000), 128 + SIGABRT);

    pid = rh_fork_child(child_sleep, NULL);
    assert_true(pid > 0);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rh_wait_child(pid, 200), -1);
    int64_t took = rh_now_ms() - t0;
    assert_true(took >= 190);
    assert_true(took < 2000);
    assert_true(pid_gone_within(pid, 0));
}

static void test_children_leave_parent_servers_alone(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    pid_t server = rh_pid(s);
    /* Warm the cached admin connection so that the child inherits it and must not reuse it. */
    const char *dbsize[] = {"DBSIZE", NULL};
    assert_int_equal(rh_cmd_int(s, dbsize), 0);

    pid_t pid = rh_fork_child(child_exit_after_incr, s);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 5000), 0);
    assert_int_equal(kill(server, 0), 0);
    assert_int_equal(rh_cmd_int(s, dbsize), 1);

    pid = rh_fork_child(child_abort, NULL);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 5000), 128 + SIGABRT);
    assert_int_equal(kill(server, 0), 0);
    assert_true(pings(s));
    assert_true(dir_exists(rh_dir(s)));

    const char *args[] = {"test_harness", "--child", "exit-no-server", "-1", NULL};
    pid = rh_spawn_self(args);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 10000), 0);
    assert_true(pings(s));
    rh_free(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Crash tests.                                                                                */
/* ------------------------------------------------------------------------------------------ */

/*
 * Runs this program as a child in crash mode `mode` and checks that the server it started is
 * gone within 2 s. handlers_only disables PR_SET_PDEATHSIG in the child, dir_removed says whether
 * the temp dir must be gone too, and the child must exit with want or want_alt (0: none).
 */
static void run_crash_mode(const char *mode, int handlers_only, int dir_removed, int want,
                           int want_alt)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    /* The write end must survive exec in the child; the read end must not leak into it. */
    assert_int_equal(fcntl(p[1], F_SETFD, 0), 0);
    char fdarg[16];
    snprintf(fdarg, sizeof(fdarg), "%d", p[1]);
    if (handlers_only) {
        setenv(RH_ENV_NO_PDEATHSIG, "1", 1);
    }
    const char *args[] = {"test_harness", "--child", mode, fdarg, NULL};
    pid_t child = rh_spawn_self(args);
    unsetenv(RH_ENV_NO_PDEATHSIG);
    close(p[1]);
    assert_true(child > 0);

    char buf[512];
    size_t got = 0;
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int64_t deadline = rh_now_ms() + 15000;
    while (got < sizeof(buf) - 1 && rh_now_ms() < deadline) {
        if (poll(&pfd, 1, 100) <= 0) {
            continue;
        }
        ssize_t n = read(p[0], buf + got, sizeof(buf) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(p[0]);
    buf[got] = '\0';

    int status = rh_wait_child(child, 10000);
    /* The child reports "PID DIR\n". */
    char *end = NULL;
    long server = strtol(buf, &end, 10);
    char dir[256] = "";
    int parsed = 0;
    if (end != buf && *end == ' ') {
        size_t len = strcspn(end + 1, "\n");
        if (len > 0 && len < sizeof(dir)) {
            memcpy(dir, end + 1, len);
            dir[len] = '\0';
            parsed = 2;
        }
    }

    int gone = parsed == 2 && server > 0 && pid_gone_within((pid_t)server, 2000);
    if (parsed == 2 && server > 0 && !gone) {
        /* Never leave the leftover behind, even when this test fails. */
        kill((pid_t)server, SIGKILL);
        waitpid((pid_t)server, NULL, 0);
    }
    int dir_left = dir[0] != '\0' && dir_exists(dir);
    if (dir_left) {
        /* Nothing can run in a process killed by SIGKILL, so its temp dir stays; tidy up (and
         * also when a handler failed, so that a failing run leaves nothing behind either). */
        remove_flat_dir(dir);
    }

    print_message("mode %-14s child status %d, server %ld %s, dir %s\n", mode, status, server,
                  gone ? "gone" : "LEFT BEHIND", dir_left ? "left" : "removed");
    assert_int_equal(parsed, 2);
    assert_true(gone);
    if (dir_removed) {
        assert_false(dir_left);
    }

    if (status != want && (want_alt == 0 || status != want_alt)) {
        fail_msg("mode %s: unexpected child status %d", mode, status);
    }
}

static void test_crash_abort(void **state)
{
    (void)state;
    run_crash_mode("abort", 1, 1, 128 + SIGABRT, 0);
}

static void test_crash_segv(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    /* Under TSan our handler runs first, then TSan's reports the fault and exits with 66. */
    run_crash_mode("segv", 1, 1, 128 + SIGSEGV, 66);
#else
    /* Under ASan our handler chains to ASan's, which reports the fault and exits with 1. */
    run_crash_mode("segv", 1, 1, 128 + SIGSEGV, 1);
#endif
}

static void test_crash_sigterm(void **state)
{
    (void)state;
    run_crash_mode("sigterm", 1, 1, 128 + SIGTERM, 0);
}

static void test_crash_exit_without_free(void **state)
{
    (void)state;
    run_crash_mode("exit", 1, 1, 3, 0);
}

/* cmocka catches the SEGV inside its test and carries on; the atexit handler still cleans up. */
static void test_crash_inside_cmocka(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    /* TSan's SEGV handler ends the process with _exit(66) before cmocka can catch the fault,
     * so the atexit path this mode checks never runs (PR_SET_PDEATHSIG, which this mode turns
     * off on purpose, is what cleans up in that case). The plain and ASan runs cover it. */
    skip();
#else
    run_crash_mode("cmocka-segv", 1, 1, 1, 0);
#endif
}

/* Only PR_SET_PDEATHSIG can help against SIGKILL. */
static void test_crash_sigkill(void **state)
{
    (void)state;
    run_crash_mode("sigkill", 0, 0, 128 + SIGKILL, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Child modes.                                                                                */
/* ------------------------------------------------------------------------------------------ */

static int g_report_fd = -1;

static rh_server *start_and_report(void)
{
    rh_server *s = rh_start(NULL);
    if (s == NULL || !pings(s)) {
        fprintf(stderr, "child: server did not start\n");
        _exit(90);
    }
    char line[320];
    int n = snprintf(line, sizeof(line), "%ld %s\n", (long)rh_pid(s), rh_dir(s));
    if (write(g_report_fd, line, (size_t)n) != n) {
        _exit(91);
    }
    close(g_report_fd);
    return s;
}

static void segfault_now(void)
{
    /* raise() gives a real SIGSEGV without a wild store that -Warray-bounds rejects. */
    raise(SIGSEGV);
}

static void child_cmocka_segv_test(void **state)
{
    (void)state;
    start_and_report();
    /* raise() rather than a real fault keeps valgrind --trace-children=yes free of errors here;
     * the "segv" mode covers a real fault. */
    raise(SIGSEGV);
}

static int run_child_mode(const char *mode, const char *fd)
{
    g_report_fd = (int)strtol(fd, NULL, 10);
    if (strcmp(mode, "exit-no-server") == 0) {
        exit(0);
    }
    if (strcmp(mode, "cmocka-segv") == 0) {
        /* The nested run fails on purpose; its "FAILED" lines would only confuse log readers. */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            close(null);
        }
        const struct CMUnitTest tests[] = {cmocka_unit_test(child_cmocka_segv_test)};
        int failed = cmocka_run_group_tests_name("crash_child", tests, NULL, NULL);
        /* Returning from main runs atexit, which must kill the server started in the test. */
        return failed == 1 ? 1 : 2;
    }
    start_and_report();
    if (strcmp(mode, "abort") == 0) {
        abort();
    }
    if (strcmp(mode, "segv") == 0) {
        segfault_now();
    }
    if (strcmp(mode, "sigterm") == 0) {
        raise(SIGTERM);
    }
    if (strcmp(mode, "exit") == 0) {
        exit(3);
    }
    if (strcmp(mode, "sigkill") == 0) {
        raise(SIGKILL);
    }
    return 99;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0) {
        return run_child_mode(argv[2], argv[3]);
    }
    rh_skip_if_unavailable();
    /* The crash tests orphan servers on purpose; as subreaper we can reap and check them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_servers),
        cmocka_unit_test(test_pause_resume),
        cmocka_unit_test(test_free_while_paused),
        cmocka_unit_test(test_stop_restart),
        cmocka_unit_test(test_requirepass),
        cmocka_unit_test(test_cmdstat),
        cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_children_leave_parent_servers_alone),
        cmocka_unit_test(test_crash_abort),
        cmocka_unit_test(test_crash_segv),
        cmocka_unit_test(test_crash_sigterm),
        cmocka_unit_test(test_crash_exit_without_free),
        cmocka_unit_test(test_crash_inside_cmocka),
        cmocka_unit_test(test_crash_sigkill),
    };
    return cmocka_run_group_tests_name("redis_harness", tests, NULL, NULL);
}
