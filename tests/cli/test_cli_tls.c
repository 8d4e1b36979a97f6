/*
 * The rlock command over TLS (issue 26, section 5): --tls-ca, --tls-cert, --tls-key,
 * --tls-server-name and --tls-insecure, and their RLOCK_TLS_* variables, against a TLS
 * redis-server that requires a client certificate (the certificates of tests/tls/make_certs.sh
 * in $RLOCK_TLS_CERTS); and --help listing every URL form.
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
#include "tc_redis.h"

static rh_server *g_srv;
static char g_ca[512], g_other_ca[512], g_cert[512], g_key[512];

/* `rlock --url URL <words...> status t:tls`; returns the exit status. */
static int status_with(const char *const *words, int n)
{
    const char *argv[16] = {"rlock", "--url", rh_url(g_srv)};
    int k = 3;
    for (int i = 0; i < n; i++) {
        argv[k++] = words[i];
    }
    argv[k++] = "status";
    argv[k++] = "t:tls";
    argv[k] = NULL;
    return ct_run(argv, "out", "err");
}

static void test_tls_options(void **state)
{
    (void)state;
    const char *full[] = {"--tls-ca", g_ca, "--tls-cert", g_cert, "--tls-key", g_key};
    assert_int_equal(status_with(full, 6), 0);
    assert_non_null(strstr(ct_slurp("out"), "t:tls: free, not locked"));
    /* The server requires a client certificate. */
    assert_int_equal(status_with(full, 2), 4);
    const char *named[] = {"--tls-ca",  g_ca,  "--tls-cert",        g_cert,
                           "--tls-key", g_key, "--tls-server-name", "localhost"};
    assert_int_equal(status_with(named, 8), 0);
    named[7] = "redis.example.com"; /* not in the server's certificate */
    assert_int_equal(status_with(named, 8), 4);
    assert_non_null(strstr(ct_slurp("err"), "TLS"));
    const char *other[] = {"--tls-ca",  g_other_ca, "--tls-cert",     g_cert,
                           "--tls-key", g_key,      "--tls-insecure", NULL};
    assert_int_equal(status_with(other, 6), 4);
    assert_int_equal(status_with(other, 7), 0);
    /* An unreadable file is the user's mistake: a one-line usage error naming the file. */
    const char *missing[] = {"--tls-ca", "/nonexistent/ca.crt"};
    assert_int_equal(status_with(missing, 2), 2);
    assert_non_null(strstr(ct_slurp("err"), "/nonexistent/ca.crt"));
    assert_int_equal(ct_count_of(ct_slurp("err"), "\n"), 1);
    /* A command holds the lock over TLS. */
    const char *run[] = {"rlock",      "--url", rh_url(g_srv), "--tls-ca", g_ca,
                         "--tls-cert", g_cert,  "--tls-key",   g_key,      "run",
                         "t:tls",      "--",    "/bin/sh",     "-c",       "echo \"$RLOCK_TOKEN\"",
                         NULL};
    assert_int_equal(ct_run(run, "out", NULL), 0);
    assert_true(atoi(ct_slurp("out")) > 0);
}

static void test_tls_environment(void **state)
{
    (void)state;
    setenv("RLOCK_URL", rh_url(g_srv), 1);
    setenv("RLOCK_TLS_CA", g_ca, 1);
    setenv("RLOCK_TLS_CERT", g_cert, 1);
    setenv("RLOCK_TLS_KEY", g_key, 1);
    setenv("RLOCK_TLS_SERVER_NAME", "localhost", 1);
    const char *st[] = {"rlock", "status", "t:tls", NULL};
    assert_int_equal(ct_run(st, "out", NULL), 0);
    setenv("RLOCK_TLS_SERVER_NAME", "redis.example.com", 1);
    assert_int_equal(ct_run(st, NULL, NULL), 4);
    /* The command line wins over the environment. */
    const char *named[] = {"rlock", "--tls-server-name", "localhost", "status", "t:tls", NULL};
    assert_int_equal(ct_run(named, NULL, NULL), 0);
    unsetenv("RLOCK_TLS_SERVER_NAME");
    setenv("RLOCK_TLS_CA", g_other_ca, 1);
    assert_int_equal(ct_run(st, NULL, NULL), 4);
    setenv("RLOCK_TLS_INSECURE", "1", 1);
    assert_int_equal(ct_run(st, NULL, NULL), 0);
    setenv("RLOCK_TLS_INSECURE", "yes", 1);
    assert_int_equal(ct_run(st, NULL, "err"), 2);
    assert_non_null(strstr(ct_slurp("err"), "RLOCK_TLS_INSECURE"));
    const char *vars[] = {"RLOCK_URL",     "RLOCK_TLS_CA",       "RLOCK_TLS_CERT",
                          "RLOCK_TLS_KEY", "RLOCK_TLS_INSECURE", NULL};
    for (int i = 0; vars[i] != NULL; i++) {
        unsetenv(vars[i]);
    }
}

/* --help names every URL form and TLS option, with their variables. */
static void test_help_lists_deployments(void **state)
{
    (void)state;
    const char *help[] = {"rlock", "--help", NULL};
    assert_int_equal(ct_run(help, "out", NULL), 0);
    const char *want[] = {"redis://",
                          "rediss://",
                          "unix://",
                          "redis-sentinel://",
                          "redis-cluster://",
                          "--tls-ca FILE",
                          "--tls-cert FILE",
                          "--tls-key FILE",
                          "--tls-server-name NAME",
                          "--tls-insecure",
                          "$RLOCK_TLS_CA",
                          "$RLOCK_TLS_CERT",
                          "$RLOCK_TLS_KEY",
                          "$RLOCK_TLS_SERVER_NAME",
                          "$RLOCK_TLS_INSECURE"};
    const char *out = ct_slurp("out");
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (strstr(out, want[i]) == NULL) {
            fail_msg("--help does not mention %s", want[i]);
        }
    }
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    const char *certs = getenv("RLOCK_TLS_CERTS");
    if (certs == NULL || *certs == '\0') {
        fprintf(stderr, "RLOCK_TLS_CERTS is not set (the tls_certs fixture makes them)\n");
        return -1;
    }
    snprintf(g_ca, sizeof(g_ca), "%s/ca.crt", certs);
    snprintf(g_other_ca, sizeof(g_other_ca), "%s/other_ca.crt", certs);
    snprintf(g_cert, sizeof(g_cert), "%s/client.crt", certs);
    snprintf(g_key, sizeof(g_key), "%s/client.key", certs);
    rh_tls spec = {.dir = certs, .auth_clients = 1};
    g_srv = rh_start_tls(&spec, NULL);
    if (g_srv == NULL || rh_tls_port(g_srv) <= 0 || ct_dir_init() != 0) {
        return -1;
    }
    const char *vars[] = {"RLOCK_URL",
                          "REDIS_URL",
                          "RLOCK_TLS_CA",
                          "RLOCK_TLS_CERT",
                          "RLOCK_TLS_KEY",
                          "RLOCK_TLS_SERVER_NAME",
                          "RLOCK_TLS_INSECURE",
                          "RLOCK_WATCHDOG_TIMEOUT",
                          NULL};
    for (int i = 0; vars[i] != NULL; i++) {
        unsetenv(vars[i]);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ct_dir_remove();
    rh_free(g_srv);
    return 0;
}

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_tls_options),
             cmocka_unit_test(test_tls_environment), cmocka_unit_test(test_help_lists_deployments))
