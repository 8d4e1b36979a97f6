/*
 * The recipes of issue 32 in the rlock command, two "hosts" simulated by two rlock processes on
 * one real redis-server: `-k spin` for a user that may not subscribe, --hold-at-least
 * (ShedLock's lockAtLeastFor), --once-per (at most one run per period across hosts), and
 * rlock elect / rlock leader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_spawn.h"
#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

static rh_server *g_srv;

/* A script for /bin/sh -c that touches the temp dir's file name, then sleeps secs. */
static const char *touch_sleep(const char *name, const char *secs)
{
    static char script[4][512];
    static int next;
    char *s = script[next++ % 4];
    snprintf(s, sizeof(script[0]), "touch '%s'; sleep %s", ct_path(name), secs);
    return s;
}

/* -k spin as a user whose ACL refuses subscribe: a second host waits for the first by polling,
 * where the reentrant kind is refused (exit 4). */
static void test_kind_spin(void **state)
{
    (void)state;
    const char *acl[] = {"ACL", "SETUSER", "nosub",      "on",          ">nosub-pw",   "~*",
                         "&*",  "+@all",   "-subscribe", "-psubscribe", "-ssubscribe", NULL};
    free(rh_cmd_str(g_srv, acl));
    char url[128];
    snprintf(url, sizeof(url), "redis://nosub:nosub-pw@127.0.0.1:%d", rh_port(g_srv));
    const char *a[] = {"rlock",
                       "--url",
                       url,
                       "run",
                       "-k",
                       "spin",
                       "cron:spin",
                       "--",
                       "/bin/sh",
                       "-c",
                       touch_sleep("a", "1"),
                       NULL};
    pid_t pa = ct_spawn(a, NULL, "err-a");
    assert_true(ct_await_file("a"));
    const char *re[] = {"rlock", "--url", url, "run", "-w", "5s", "cron:spin", "--", "true", NULL};
    assert_int_equal(ct_run(re, NULL, "err-b"), 4);
    const char *b[] = {"rlock", "--url",     url,  "run",     "-k", "spin",           "-w",
                       "5s",    "cron:spin", "--", "/bin/sh", "-c", "test -e \"$0\"", ct_path("a"),
                       NULL};
    int64_t t0 = rh_now_ms();
    assert_int_equal(ct_run(b, NULL, "err-b"), 0);
    print_message("spin waiter ran %lld ms after it started\n", (long long)(rh_now_ms() - t0));
    assert_int_equal(rh_wait_child(pa, 10000), 0);
}

/* rlock run -n NAME -- true: 0 when the lock was free, 1 when held. */
static int try_now(const char *name)
{
    const char *argv[] = {"rlock", "run", "-n", "-q", name, "--", "true", NULL};
    return ct_run(argv, NULL, NULL);
}

static long long pttl(const char *key)
{
    const char *argv[] = {"PTTL", key, NULL};
    return rh_cmd_int(g_srv, argv);
}

/* --hold-at-least: a command that ends sooner leaves the lock held (its TTL the rest of the
 * duration) until the duration is over, then a second host gets it. */
static void test_hold_at_least_early(void **state)
{
    (void)state;
    const char *a[] = {"rlock", "run", "--hold-at-least", "1500ms", "cron:hold", "--",
                       "true",  NULL};
    int64_t t0 = rh_now_ms();
    assert_int_equal(ct_run(a, NULL, "err"), 0);
    int64_t took = rh_now_ms() - t0;
    long long ttl = pttl("cron:hold");
    print_message("rlock run took %lld ms, the lock's TTL is %lld ms\n", (long long)took, ttl);
    assert_true(took < 1000);
    assert_in_range(ttl, 1, 1500);
    assert_int_equal(try_now("cron:hold"), 1);
    rh_sleep_ms(t0 + 1600 - rh_now_ms());
    assert_int_equal(try_now("cron:hold"), 0);
}

/* --hold-at-least shorter than the command: the hold is extended past its first lease while the
 * command runs and released when it ends; a command that ends after the extension but before
 * the duration keeps the lock until the duration is over, then releases it. */
static void test_hold_at_least_long(void **state)
{
    (void)state;
    const char *a[] = {"rlock",   "run", "--hold-at-least",        "600ms", "cron:hold2", "--",
                       "/bin/sh", "-c",  touch_sleep("h2", "1.2"), NULL};
    int64_t t0 = rh_now_ms();
    pid_t pa = ct_spawn(a, NULL, "err");
    assert_true(ct_await_file("h2"));
    rh_sleep_ms(t0 + 900 - rh_now_ms());
    assert_int_equal(try_now("cron:hold2"), 1); /* past the first lease: extended */
    assert_int_equal(rh_wait_child(pa, 10000), 0);
    assert_int_equal(try_now("cron:hold2"), 0); /* released when the command ended */
    const char *b[] = {"rlock", "run", "--hold-at-least", "900ms", "cron:hold3", "--", "sleep",
                       "0.75",  NULL};
    t0 = rh_now_ms();
    assert_int_equal(ct_run(b, NULL, "err"), 0);
    int64_t took = rh_now_ms() - t0;
    print_message("extended, ended sooner: rlock run took %lld ms\n", (long long)took);
    assert_true(took >= 900);
    assert_int_equal(try_now("cron:hold3"), 0);
}

/* Runs `rlock run --once-per DUR [extra] NAME -- /bin/sh -c SCRIPT` and returns its status. */
static int once(const char *dur, const char *extra, const char *name, const char *script)
{
    const char *argv[12] = {"rlock", "run", "--once-per", dur};
    int n = 4;
    if (extra != NULL) {
        argv[n++] = extra;
    }
    const char *tail[] = {name, "--", "/bin/sh", "-c", script, NULL};
    memcpy(argv + n, tail, sizeof(tail));
    return ct_run(argv, NULL, "err");
}

static void test_once_per(void **state)
{
    (void)state;
    char script[256];
    snprintf(script, sizeof(script), "echo run >> '%s'", ct_path("once"));
    assert_int_equal(once("2s", NULL, "cron:once", script), 0);
    long long ttl = pttl("{cron:once}:rlock_once");
    print_message("marker TTL %lld ms\n", ttl);
    assert_in_range(ttl, 1, 2000);
    assert_int_equal(once("2s", NULL, "cron:once", script), 1);
    assert_non_null(strstr(ct_slurp("err"), "skipped"));
    assert_int_equal(once("2s", "-E0", "cron:once", script), 0);
    assert_string_equal(ct_slurp("err"), "");
    assert_int_equal(ct_count_of(ct_slurp("once"), "run"), 1);
    /* A failed run leaves no marker, unless --mark-on-failure. */
    assert_int_equal(once("2s", NULL, "cron:fail", "exit 5"), 5);
    assert_int_equal(once("2s", NULL, "cron:fail", script), 0);
    assert_int_equal(ct_count_of(ct_slurp("once"), "run"), 2);
    assert_int_equal(once("2s", "--mark-on-failure", "cron:mof", "exit 5"), 5);
    assert_int_equal(once("2s", NULL, "cron:mof", script), 1);
    assert_int_equal(ct_count_of(ct_slurp("once"), "run"), 2);
    /* The period ends: the next run runs. */
    assert_int_equal(once("500ms", NULL, "cron:exp", script), 0);
    rh_sleep_ms(600);
    assert_int_equal(once("500ms", NULL, "cron:exp", script), 0);
    assert_int_equal(ct_count_of(ct_slurp("once"), "run"), 4);
    /* A name with a hash tag of its own keeps it: the marker is NAME:rlock_once. */
    assert_int_equal(once("2s", NULL, "{cron}:tagged", "true"), 0);
    assert_in_range(pttl("{cron}:tagged:rlock_once"), 1, 2000);
    const char *bad[] = {"rlock", "run", "--mark-on-failure", "cron:x", "--", "true", NULL};
    assert_int_equal(ct_run(bad, NULL, NULL), 2);
    const char *bad2[] = {"rlock", "run", "--once-per", "0", "cron:x", "--", "true", NULL};
    assert_int_equal(ct_run(bad2, NULL, NULL), 2);
}

/* The crontab line of two hosts firing at once: exactly one runs, the other skips. */
static void test_once_per_two_hosts(void **state)
{
    (void)state;
    char script[256];
    snprintf(script, sizeof(script), "echo run >> '%s'; sleep 0.3", ct_path("race"));
    const char *argv[] = {"rlock", "run",       "--once-per", "5s",      "-w", "5s",   "-E",
                          "0",     "cron:race", "--",         "/bin/sh", "-c", script, NULL};
    pid_t a = ct_spawn(argv, NULL, NULL);
    pid_t b = ct_spawn(argv, NULL, NULL);
    assert_int_equal(rh_wait_child(a, 10000), 0);
    assert_int_equal(rh_wait_child(b, 10000), 0);
    assert_int_equal(ct_count_of(ct_slurp("race"), "run"), 1);
}

/* rlock elect and rlock leader: host A leads and its command sees its term; host B waits in
 * line; A's leadership is lost (its hold deleted): A's command is signalled and A exits 3, B
 * takes over with a larger term; rlock leader shows each. */
static void test_elect_leader(void **state)
{
    (void)state;
    const char *show[] = {"rlock", "leader", "el:cli", NULL};
    assert_int_equal(ct_run(show, "out", NULL), 1);
    assert_non_null(strstr(ct_slurp("out"), "no leader (last term 0)"));
    char sa[256], sb[256];
    snprintf(sa, sizeof(sa), "echo $RLOCK_TERM > '%s'; sleep 30", ct_path("term-a"));
    snprintf(sb, sizeof(sb), "echo $RLOCK_TERM > '%s'", ct_path("term-b"));
    const char *a[] = {"rlock",   "--watchdog-timeout",
                       "900ms",   "elect",
                       "--value", "host-a",
                       "el:cli",  "--",
                       "/bin/sh", "-c",
                       sa,        NULL};
    const char *b[] = {"rlock",  "elect", "--value", "host-b", "-w", "20s",
                       "el:cli", "--",    "/bin/sh", "-c",     sb,   NULL};
    pid_t pa = ct_spawn(a, NULL, "err-a");
    assert_true(ct_await_file("term-a"));
    pid_t pb = ct_spawn(b, NULL, "err-b");
    long term_a = atol(ct_slurp("term-a"));
    assert_true(term_a > 0);
    assert_int_equal(ct_run(show, "out", NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "leader host-a, term %ld", term_a);
    assert_non_null(strstr(ct_slurp("out"), want));
    assert_non_null(strstr(ct_slurp("out"), ", since 20")); /* an ISO date follows */
    assert_non_null(strstr(ct_slurp("out"), "Z\n"));
    const char *js[] = {"rlock", "leader", "--json", "el:cli", NULL};
    assert_int_equal(ct_run(js, "out", NULL), 0);
    assert_non_null(strstr(ct_slurp("out"), "\"leader\":true,\"value\":\"host-a\""));
    const char *since = strstr(ct_slurp("out"), "\"since_ms\":");
    assert_non_null(since);
    assert_true(atoll(since + strlen("\"since_ms\":")) > 1700000000000LL);
    rh_sleep_ms(300); /* B is in line */
    const char *del[] = {"DEL", "el:cli", NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    assert_int_equal(rh_wait_child(pa, 10000), 3);
    assert_non_null(strstr(ct_slurp("err-a"), "leadership was lost"));
    assert_int_equal(rh_wait_child(pb, 20000), 0);
    long term_b = atol(ct_slurp("term-b"));
    print_message("terms: A %ld, B %ld\n", term_a, term_b);
    assert_true(term_b > term_a);
    assert_int_equal(ct_run(show, "out", NULL), 1); /* B resigned when its command ended */
    assert_int_equal(ct_run(js, "out", NULL), 1);
    assert_non_null(strstr(ct_slurp("out"), "\"since_ms\":null}"));
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_srv = rh_start(NULL);
    if (g_srv == NULL || ct_dir_init() != 0) {
        return -1;
    }
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

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_kind_spin),
             cmocka_unit_test(test_hold_at_least_early), cmocka_unit_test(test_hold_at_least_long),
             cmocka_unit_test(test_once_per), cmocka_unit_test(test_once_per_two_hosts),
             cmocka_unit_test(test_elect_leader))
