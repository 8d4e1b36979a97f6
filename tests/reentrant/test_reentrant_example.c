/*
 * Runs examples/counter (path given as argv[1] by CTest) against a harness redis-server: 4
 * processes x 250 locked read-modify-write increments must end with the counter exactly 1000,
 * and the example must say so with exit status 0.
 */
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "re_common.h"

extern char **environ;

static const char *g_example;

static void test_counter_example_is_exact(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    char *argv[] = {(char *)g_example, (char *)rh_url(s), "4", "250", NULL};
    pid_t pid = -1;
    assert_int_equal(posix_spawn(&pid, g_example, NULL, NULL, argv, environ), 0);
    assert_int_equal(rh_wait_child(pid, 60000), 0);
    const char *get[] = {"GET", "example:counter", NULL};
    assert_int_equal(rh_cmd_int(s, get), 1000);
    const char *exists[] = {"EXISTS", "example:counter:lock", NULL};
    assert_int_equal(rh_cmd_int(s, exists), 0);
    rh_free(s);
}

TC_MAIN_PATH(g_example, "path of example_counter", tc_require_server, NULL,
             cmocka_unit_test(test_counter_example_is_exact))
