/*
 * Socket dialling with a deadline (sock.h): a non-blocking connect() completed with poll(), so
 * that a host that drops SYNs costs connect_timeout_ms and not the kernel's minutes. Name
 * resolution, which poll() cannot bound, is resolve.c's, within the same deadline. Static
 * helpers are named sock_*.
 */
#ifndef _GNU_SOURCE
/* SOCK_NONBLOCK, SOCK_CLOEXEC and the TCP keepalive options are Linux's, not POSIX's. */
#define _GNU_SOURCE // NOLINT(bugprone-reserved-identifier)
#endif
#include "sock.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "error.h"
#include "util.h"
#include "resolve.h"

/* Completes a connect() on a non-blocking fd: 0, or the errno of the failure (ETIMEDOUT once
 * the deadline passed). */
static int sock_connect(int fd, const struct sockaddr *addr, socklen_t len, int64_t deadline_ms)
{
    if (connect(fd, addr, len) == 0) {
        return 0;
    }
    if (errno != EINPROGRESS && errno != EINTR) {
        return errno;
    }
    for (;;) {
        int64_t left = deadline_ms - rlk_now_ms();
        if (left <= 0) {
            return ETIMEDOUT;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n = poll(&pfd, 1, (int)(left > INT_MAX ? INT_MAX : left));
        if (n > 0) {
            break;
        }
        if (n < 0 && errno != EINTR) {
            return errno;
        }
    }
    int err = 0;
    socklen_t elen = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
        return errno;
    }
    return err;
}

/* No Nagle delay (a request is one write, its reply awaited at once), and keepalive probes so
 * that an idle pooled connection to a host that vanished is found dead within a minute. */
static void sock_tune_tcp(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
#ifdef TCP_KEEPIDLE
    int idle = 15, intvl = 5, cnt = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
#endif
}

/* Tries one address; 0 and *out, or the errno of the failure. */
static int sock_try(const struct addrinfo *ai, int64_t deadline_ms, int *out)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    int e = sock_connect(fd, ai->ai_addr, ai->ai_addrlen, deadline_ms);
    if (e != 0) {
        close(fd);
        return e;
    }
    sock_tune_tcp(fd);
    *out = fd;
    return 0;
}

static int sock_fail(const char *where, int e)
{
    if (e == ETIMEDOUT) {
        return rlk_err(RLOCK_ECONN, "connect to %s: no answer within connect_timeout_ms", where);
    }
    return rlk_err(RLOCK_ECONN, "connect to %s: %s", where, strerror(e));
}

int rlk_sock_dial_tcp(const char *host, int port, int64_t deadline_ms, int *fd)
{
    char where[300];
    snprintf(where, sizeof(where), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    struct addrinfo *res = NULL;
    int r = rlk_resolve(host, port, where, deadline_ms, &res);
    if (r != RLOCK_OK) {
        return r;
    }
    int e = EHOSTUNREACH;
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        e = sock_try(ai, deadline_ms, fd);
        if (e == 0 || e == ETIMEDOUT) {
            break;
        }
    }
    freeaddrinfo(res);
    return e == 0 ? RLOCK_OK : sock_fail(where, e);
}

int rlk_sock_dial_unix(const char *path, int64_t deadline_ms, int *fd)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return rlk_err(RLOCK_ECONN, "connect to unix socket: path too long");
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return sock_fail(path, errno);
    }
    int e = sock_connect(s, (const struct sockaddr *)&sa, sizeof(sa), deadline_ms);
    if (e != 0) {
        close(s);
        return sock_fail(path, e);
    }
    *fd = s;
    return RLOCK_OK;
}
