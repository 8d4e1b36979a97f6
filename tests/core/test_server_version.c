/*
 * rlock_client_new() against servers of several versions, played by a small fake server (a
 * thread of this test on a loopback port answering PING and INFO): Redis older than 7.0 cannot
 * run the scripts' flags and is refused at creation with RLOCK_ENOTSUP naming it; Redis 7.0 and
 * Valkey (redis_version 7.2.4 beside valkey_version) are accepted, and so is a server that denies
 * INFO to the user.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "rlock.h"

#define MAX_CONNS 8

/* One fake server: what it answers to INFO, and how many scripts it was asked to run. */
typedef struct {
    const char *info; /* INFO's text, or NULL: INFO is denied (NOPERM) */
    int listen_fd;
    int port;
    atomic_int stop;
    atomic_int scripts; /* EVAL, EVALSHA and SCRIPT commands received */
    pthread_t thread;
} fake_server;

typedef struct {
    int fd;
    char buf[4096];
    size_t len;
} fake_conn;

/* Writes all of s to fd (the client reads what it asked for; a short write would hang it). */
static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

/* Answers one command named name (the first argument, upper or lower case). */
static void answer(fake_server *fs, int fd, const char *name)
{
    char reply[4096];
    if (strcasecmp(name, "PING") == 0) {
        send_all(fd, "+PONG\r\n", 7);
    } else if (strcasecmp(name, "INFO") == 0 && fs->info != NULL) {
        int n = snprintf(reply, sizeof(reply), "$%zu\r\n%s\r\n", strlen(fs->info), fs->info);
        send_all(fd, reply, (size_t)n);
    } else if (strcasecmp(name, "INFO") == 0) {
        const char *e = "-NOPERM this user has no permissions to run the 'info' command\r\n";
        send_all(fd, e, strlen(e));
    } else {
        if (strncasecmp(name, "EVAL", 4) == 0 || strcasecmp(name, "SCRIPT") == 0) {
            atomic_fetch_add(&fs->scripts, 1);
        }
        int n = snprintf(reply, sizeof(reply), "-ERR unknown command '%s'\r\n", name);
        send_all(fd, reply, (size_t)n);
    }
}

/* Parses the complete commands at the head of c->buf (RESP arrays of bulk strings) and answers
 * each; keeps an incomplete tail for the next read. */
static void serve_buffer(fake_server *fs, fake_conn *c)
{
    for (;;) {
        char *p = c->buf, *end = c->buf + c->len, name[64] = "";
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL || *p != '*') {
            return;
        }
        long argc = strtol(p + 1, NULL, 10);
        p = eol + 1;
        for (long i = 0; i < argc; i++) {
            eol = memchr(p, '\n', (size_t)(end - p));
            if (eol == NULL) {
                return;
            }
            long len = strtol(p + 1, NULL, 10);
            if (end - (eol + 1) < len + 2) {
                return;
            }
            if (i == 0) {
                snprintf(name, sizeof(name), "%.*s", (int)len, eol + 1);
            }
            p = eol + 1 + len + 2;
        }
        answer(fs, c->fd, name);
        c->len = (size_t)(end - p);
        memmove(c->buf, p, c->len);
    }
}

/* Accepts a new connection into a free slot of conns (closing it when none is free). */
static void accept_one(fake_server *fs, fake_conn *conns, int *n)
{
    int fd = accept(fs->listen_fd, NULL, NULL);
    if (fd < 0) {
        return;
    }
    if (*n == MAX_CONNS) {
        close(fd);
        return;
    }
    conns[*n].fd = fd;
    conns[*n].len = 0;
    (*n)++;
}

static void *fake_main(void *arg)
{
    fake_server *fs = arg;
    fake_conn conns[MAX_CONNS];
    int n = 0;
    while (!atomic_load(&fs->stop)) {
        struct pollfd pfd[MAX_CONNS + 1] = {{.fd = fs->listen_fd, .events = POLLIN}};
        for (int i = 0; i < n; i++) {
            pfd[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        }
        if (poll(pfd, (nfds_t)n + 1, 50) <= 0) {
            continue;
        }
        for (int i = n - 1; i >= 0; i--) {
            if (pfd[i + 1].revents == 0) {
                continue;
            }
            fake_conn *c = &conns[i];
            ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
            if (r <= 0 || c->len + (size_t)r == sizeof(c->buf)) {
                close(c->fd);
                conns[i] = conns[--n];
                continue;
            }
            c->len += (size_t)r;
            serve_buffer(fs, c);
        }
        if (pfd[0].revents != 0) {
            accept_one(fs, conns, &n);
        }
    }
    for (int i = 0; i < n; i++) {
        close(conns[i].fd);
    }
    return NULL;
}

/* Starts a fake server answering INFO with info (NULL: denied) on a free loopback port. */
static fake_server *fake_start(const char *info)
{
    fake_server *fs = calloc(1, sizeof(*fs));
    assert_non_null(fs);
    fs->info = info;
    fs->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fs->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(fs->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fs->listen_fd, 16), 0);
    assert_int_equal(getsockname(fs->listen_fd, (struct sockaddr *)&a, &alen), 0);
    fs->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&fs->thread, NULL, fake_main, fs), 0);
    return fs;
}

static void fake_stop(fake_server *fs)
{
    atomic_store(&fs->stop, 1);
    pthread_join(fs->thread, NULL);
    close(fs->listen_fd);
    free(fs);
}

/* rlock_client_new() on fs with short timeouts; the client (or NULL) in *out. */
static int client_on(const fake_server *fs, rlock_client **out)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fs->port);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 2000;
    o.command_timeout_ms = 2000;
    return rlock_client_new(&o, out);
}

#define INFO_HEAD "# Server\r\n"
#define INFO_TAIL                                                                                  \
    "redis_mode:standalone\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"

/* A server that cannot run the scripts is refused at creation, naming it and its version;
 * no script was sent to it. */
static void expect_refused(const char *info, const char *name, const char *version)
{
    fake_server *fs = fake_start(info);
    rlock_client *c = (rlock_client *)&c;
    assert_int_equal(client_on(fs, &c), RLOCK_ENOTSUP);
    assert_null(c);
    const char *msg = rlock_last_error();
    if (strstr(msg, name) == NULL || strstr(msg, version) == NULL) {
        fail_msg("message \"%s\" names neither %s nor %s", msg, name, version);
    }
    assert_int_equal(atomic_load(&fs->scripts), 0);
    fake_stop(fs);
}

static void expect_accepted(const char *info)
{
    fake_server *fs = fake_start(info);
    rlock_client *c = NULL;
    int r = client_on(fs, &c);
    if (r != RLOCK_OK) {
        fail_msg("rlock_client_new: %d (%s)", r, rlock_last_error());
    }
    assert_non_null(c);
    rlock_client_free(c);
    fake_stop(fs);
}

static void test_redis_62_refused(void **state)
{
    (void)state;
    expect_refused(INFO_HEAD "redis_version:6.2.14\r\nredis_git_sha1:00000000\r\n" INFO_TAIL,
                   "redis", "6.2.14");
}

static void test_redis_50_refused(void **state)
{
    (void)state;
    expect_refused(INFO_HEAD "redis_version:5.0.14\r\n" INFO_TAIL, "redis", "5.0.14");
}

/* A server that names itself and reports an old Redis API is named by its own name and
 * version. */
static void test_other_server_old_api_refused(void **state)
{
    (void)state;
    expect_refused(INFO_HEAD "redis_version:6.0.0\r\nserver_name:keyfake\r\n"
                             "keyfake_version:2.1.3\r\n" INFO_TAIL,
                   "keyfake", "2.1.3");
}

static void test_redis_70_accepted(void **state)
{
    (void)state;
    expect_accepted(INFO_HEAD "redis_version:7.0.15\r\n" INFO_TAIL);
}

/* Valkey 8.0's INFO server, as valkey-server 8.0.1 writes it. */
static void test_valkey_8_accepted(void **state)
{
    (void)state;
    expect_accepted(INFO_HEAD "redis_version:7.2.4\r\nserver_name:valkey\r\n"
                              "valkey_version:8.0.1\r\nredis_git_sha1:00000000\r\n" INFO_TAIL);
}

/* A user denied INFO cannot be checked; its client is not refused for that. */
static void test_info_denied_accepted(void **state)
{
    (void)state;
    expect_accepted(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_62_refused),
        cmocka_unit_test(test_redis_50_refused),
        cmocka_unit_test(test_other_server_old_api_refused),
        cmocka_unit_test(test_redis_70_accepted),
        cmocka_unit_test(test_valkey_8_accepted),
        cmocka_unit_test(test_info_denied_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
