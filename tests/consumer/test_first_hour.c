/*
 * A new user's first hour, as README.md leads it: the build on a machine without cmocka, the
 * install into a prefix of one's own, the first example run from there against REDIS_URL, every
 * example pointed at a server by REDIS_URL alone, and examples/redlock3.sh's report. The servers
 * are the harness'; the shell steps are user_build.sh and first_example.sh beside this file.
 *
 * Usage: first_hour SOURCE_DIR CMAKE EXAMPLES_DIR (registered by tests/cmake/core.cmake).
 */
#include <regex.h>
#include <setjmp.h>
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

#include "redis_harness.h"
#include "tc_redis.h"

static const char *src_dir;
static const char *cmake_exe;
static const char *examples_dir;
static char work[] = "/tmp/rlock-first-hour.XXXXXX";
static rh_server *srv;

#define OUT_CAP (256 * 1024)
static char out[OUT_CAP];

/* Runs cmd through sh with its output in out (also echoed for the log); its exit status, or -1. */
static int run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    printf("$ %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, OUT_CAP - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    fputs(out, stdout);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long long server_int(rh_server *s, int argc, const char **argv)
{
    redisContext *ctx = rh_connect(s);
    assert_non_null(ctx);
    long long v = tc_int(ctx, argc, argv);
    redisFree(ctx);
    return v;
}

static long long dbsize(rh_server *s)
{
    const char *argv[] = {"DBSIZE"};
    return server_int(s, 1, argv);
}

static void flushall(rh_server *s)
{
    const char *argv[] = {"FLUSHALL"};
    assert_int_equal(server_int(s, 1, argv), 1);
}

static int matches(const char *text, const char *pattern)
{
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
    int r = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return r;
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    srv = rh_start(NULL);
    if (srv == NULL || mkdtemp(work) == NULL) {
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rh_free(srv);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
    return system(cmd) == 0 ? 0 : -1;
}

/* README "Build and install" with cmocka hidden: configures (tests off, with a notice), builds,
 * installs into work/prefix; -DRLOCK_BUILD_TESTS=ON still asks for cmocka. */
static void test_user_build_without_cmocka(void **state)
{
    (void)state;
    assert_int_equal(run("sh '%s/tests/consumer/user_build.sh' '%s' '%s' '%s' 2>&1", src_dir,
                         cmake_exe, src_dir, work),
                     0);
}

/* README's first example, built by README's cc line against work/prefix, runs without
 * LD_LIBRARY_PATH on the server REDIS_URL names: its fencing counter is there afterwards. */
static void test_first_example_from_prefix(void **state)
{
    (void)state;
    flushall(srv);
    setenv("REDIS_URL", rh_url(srv), 1);
    assert_int_equal(run("sh '%s/tests/consumer/first_example.sh' '%s/README.md' '%s/prefix' '%s' "
                         "2>&1",
                         src_dir, src_dir, work, work),
                     0);
    const char *exists[] = {"EXISTS", "redisson_lock_token:{orders:42}"};
    assert_int_equal(server_int(srv, 2, exists), 1);
}

/* One example run with REDIS_URL as its only pointer to the server: it succeeds and leaves keys
 * on that server (a fencing counter at least). */
static void run_example(const char *args)
{
    flushall(srv);
    setenv("REDIS_URL", rh_url(srv), 1);
    assert_int_equal(run("cd '%s' && '%s'/%s 2>&1", work, examples_dir, args), 0);
    assert_true(dbsize(srv) > 0);
}

static void test_examples_read_redis_url(void **state)
{
    (void)state;
    run_example("counter 2 25");
    run_example("fifo_jobs --workers 2 --jobs 4 --gap 20 --work 5 --journal fifo.journal");
    run_example("rw_cache 3 1");
    run_example("transfer --workers 2 --transfers 20 --accounts 4");
    run_example("worker_pool 3 12");
    /* redlock3 takes three servers: REDIS_URL lists them. */
    rh_server *more[2] = {rh_start(NULL), rh_start(NULL)};
    assert_non_null(more[0]);
    assert_non_null(more[1]);
    char urls[512];
    snprintf(urls, sizeof(urls), "%s,%s,%s", rh_url(srv), rh_url(more[0]), rh_url(more[1]));
    setenv("REDIS_URL", urls, 1);
    assert_int_equal(run("cd '%s' && mkdir -p rl3 && '%s'/redlock3 --dir rl3 --threads 2 "
                         "--iterations 10 && '%s'/redlock3 --check rl3 --expect 20 2>&1",
                         work, examples_dir, examples_dir),
                     0);
    assert_true(dbsize(srv) > 0 && dbsize(more[0]) > 0 && dbsize(more[1]) > 0);
    rh_free(more[0]);
    rh_free(more[1]);
}

/* examples/redlock3.sh prints the counter when server 2 dies and after the outage, and names
 * the server its header says it kills. */
static void test_redlock3_script_reports(void **state)
{
    (void)state;
    assert_int_equal(run("RLOCK_SKIP_APT=1 REDLOCK3='%s/redlock3' THREADS=2 ITERATIONS=100 "
                         "LEASE_MS=2000 bash '%s/examples/redlock3.sh' 2>&1",
                         examples_dir, src_dir),
                     0);
    assert_true(matches(out, "killing server 2 .* counter now [0-9]+$"));
    assert_true(matches(out, "^counter after the outage: [0-9]+ "));
    assert_true(matches(out, "verdict: PASS"));
    assert_int_equal(run("grep -c 'server 2 is killed' '%s/examples/redlock3.sh'", src_dir), 0);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SOURCE_DIR CMAKE EXAMPLES_DIR\n", argv[0]);
        return 2;
    }
    src_dir = argv[1];
    cmake_exe = argv[2];
    examples_dir = argv[3];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_build_without_cmocka),
        cmocka_unit_test(test_first_example_from_prefix),
        cmocka_unit_test(test_examples_read_redis_url),
        cmocka_unit_test(test_redlock3_script_reports),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
