/*
 * Runs examples/metrics_http (path given as argv[1] by CTest) against a harness redis-server on a
 * free loopback port: once its 3 workers x 20 rounds are done, GET /metrics answers 200 with
 * every family of docs/observability.md, and rlock_acquire_total counts exactly the lock and
 * semaphore acquires the example printed; anything but /metrics is a 404.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "tc_redis.h"

extern char **environ;

static const char *g_example;
static pid_t g_pid = -1;

/* Kills the example if a failed check left it serving (it would hold CTest's output open). */
static int stop_example(void **state)
{
    (void)state;
    if (g_pid > 0) {
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
        g_pid = -1;
    }
    return 0;
}

/* Reads the child's stdout until a line starting with prefix arrives (within 30 s); that line is
 * left in line. 1 found, 0 not. */
static int read_line(int fd, const char *prefix, char *line, size_t size)
{
    static char buf[4096];
    static size_t len;
    int64_t deadline = rh_now_ms() + 30000;
    for (;;) {
        char *nl = memchr(buf, '\n', len);
        while (nl != NULL) {
            size_t n = (size_t)(nl - buf);
            int hit = strncmp(buf, prefix, strlen(prefix)) == 0 && n < size;
            if (hit) {
                memcpy(line, buf, n);
                line[n] = '\0';
            }
            memmove(buf, nl + 1, len - n - 1);
            len -= n + 1;
            if (hit) {
                return 1;
            }
            nl = memchr(buf, '\n', len);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - rh_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || len == sizeof(buf)) {
            return 0;
        }
        ssize_t got = read(fd, buf + len, sizeof(buf) - len);
        if (got <= 0) {
            return 0;
        }
        len += (size_t)got;
    }
}

/* GET path from 127.0.0.1:port; the whole response (malloc()ed) or NULL. */
static char *http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        return NULL;
    }
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    if (out != NULL && send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
        ssize_t got;
        while ((got = recv(fd, out + len, cap - len - 1, 0)) > 0) {
            len += (size_t)got;
            char *more = len + 1 == cap ? realloc(out, cap *= 2) : out;
            if (more == NULL) {
                break;
            }
            out = more;
        }
        out[len] = '\0';
    }
    close(fd);
    return out;
}

/* The value of the sample of family name whose labels hold both label texts, or -1. */
static long long sample(const char *text, const char *name, const char *l1, const char *l2)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        if (len >= sizeof(line) || strncmp(p, name, n) != 0 || p[n] != '{') {
            continue;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        char *close = strchr(line, '}');
        if (close != NULL && strstr(line, l1) != NULL && strstr(line, l2) != NULL) {
            return strtoll(close + 1, NULL, 10);
        }
    }
    return -1;
}

static const char *const families[] = {
    "# TYPE rlock_acquire counter",        "# TYPE rlock_acquire_wait_seconds histogram",
    "# TYPE rlock_hold_seconds histogram", "# TYPE rlock_holds gauge",
    "# TYPE rlock_waiters gauge",          "# TYPE rlock_lost counter",
    "# TYPE rlock_renewals counter",       "# TYPE rlock_replica_sync_failures counter",
    "# TYPE rlock_reconnects counter",     "# TYPE rlock_failovers counter",
    "# TYPE rlock_redis_commands counter", "# TYPE rlock_pubsub_messages counter",
};

static void test_metrics_example_serves_exact_counts(void **state)
{
    (void)state;
    rh_server *s = tc_start();
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    /* Port 0: the example takes a free port and prints it; 3 workers x 20 rounds; 2 requests. */
    char *argv[] = {(char *)g_example, (char *)rh_url(s), "0", "20", "2", NULL};
    assert_int_equal(posix_spawn(&g_pid, g_example, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    char line[256];
    int port = 0;
    assert_true(read_line(out[0], "listening on ", line, sizeof(line)));
    assert_int_equal(sscanf(line, "listening on http://127.0.0.1:%d/metrics", &port), 1);
    assert_true(read_line(out[0], "done: ", line, sizeof(line)));
    int locked = -1, permits = -1;
    assert_int_equal(
        sscanf(line, "done: %d lock acquires, %d semaphore acquires", &locked, &permits), 2);
    assert_int_equal(locked, 60);
    assert_int_equal(permits, 60);

    char *resp = http_get(port, "/metrics");
    assert_non_null(resp);
    assert_int_equal(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17), 0);
    const char *body = strstr(resp, "\r\n\r\n");
    assert_non_null(body);
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        if (strstr(body, families[i]) == NULL) {
            fail_msg("no '%s' in:\n%s", families[i], body);
        }
    }
    assert_int_equal(sample(body, "rlock_acquire_total", "kind=\"reentrant\"", "result=\"ok\""),
                     locked);
    assert_int_equal(sample(body, "rlock_acquire_total", "kind=\"semaphore\"", "result=\"ok\""),
                     permits);
    assert_int_equal(sample(body, "rlock_acquire_total", "kind=\"fair\"", "result=\"ok\""), 0);
    assert_non_null(strstr(body, "# EOF"));
    free(resp);

    resp = http_get(port, "/other");
    assert_non_null(resp);
    assert_int_equal(strncmp(resp, "HTTP/1.1 404 ", 13), 0);
    free(resp);
    assert_int_equal(rh_wait_child(g_pid, 30000), 0);
    g_pid = -1;
    close(out[0]);
    rh_free(s);
}

TC_MAIN_PATH(g_example, "path of example_metrics_http", tc_require_server, NULL,
             cmocka_unit_test_teardown(test_metrics_example_serves_exact_counts, stop_example))
