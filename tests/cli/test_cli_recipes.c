/*
 * The recipes of issue 32 in the rlock command, two "hosts" simulated by two rlock processes on
 * one real redis-server: `-k spin` for a user that may not subscribe.
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

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_kind_spin))
