/*
 * Runs examples/fifo_jobs (path given as argv[1]) against a harness-started redis-server: its
 * worker processes must apply every job in arrival order, which its own checker verifies (exit
 * status 0), and nothing may be left in the lock's queue afterwards. Then the checker itself
 * must reject a journal with two lines swapped (exit status 1), so a passing run means something.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fair_common.h"

static const char *g_exe;

/* Runs argv and returns its exit status (-1 if it did not exit normally). */
static int run(char *const *argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

/* Arrivals 60 ms apart: the example's premise is that a job joins the queue before the next one
 * arrives, and with 20 ms a full parallel ctest run on the 2-core box sometimes delayed a worker
 * thread's first request past the next arrival (reported as FIFO inversions that were arrival
 * order, not grant order). */
static void test_fifo_jobs_example(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    char journal[512], swapped[512];
    snprintf(journal, sizeof(journal), "%s/journal", rh_dir(s));
    snprintf(swapped, sizeof(swapped), "%s/swapped", rh_dir(s));
    char *argv[] = {(char *)g_exe, "--url",        (char *)rh_url(s),
                    "--name",      "fair:example", "--workers",
                    "3",           "--jobs",       "12",
                    "--gap",       "60",           "--work",
                    "25",          "--journal",    journal,
                    NULL};
    assert_int_equal(run(argv), 0);
    assert_int_equal(fc_llen(s, "fair:example"), 0);
    assert_int_equal(fc_zcard(s, "fair:example"), 0);

    /* Swap the 2nd and 3rd lines of the journal: the checker must fail. */
    FILE *in = fopen(journal, "r");
    FILE *out = fopen(swapped, "w");
    assert_non_null(in);
    assert_non_null(out);
    char lines[12][256];
    int n = 0;
    while (n < 12 && fgets(lines[n], sizeof(lines[n]), in) != NULL) {
        n++;
    }
    assert_int_equal(n, 12);
    for (int i = 0; i < n; i++) {
        fputs(lines[i == 1 ? 2 : i == 2 ? 1 : i], out);
    }
    fclose(in);
    fclose(out);
    char *check_ok[] = {(char *)g_exe, "--check", journal, NULL};
    char *check_bad[] = {(char *)g_exe, "--check", swapped, NULL};
    assert_int_equal(run(check_ok), 0);
    assert_int_equal(run(check_bad), 1);
    rh_free(s);
}

TC_MAIN_PATH(g_exe, "path of fifo_jobs", tc_require_server, NULL,
             cmocka_unit_test(test_fifo_jobs_example))
