/*
 * Bounds of rlock's connection layer that no real Redis exercises:
 * - a host name whose DNS server never answers costs connect_timeout_ms, not the resolver's
 *   seconds (in a child with its own network and mount namespaces, whose /etc/resolv.conf names a
 *   DNS "server" on its own loopback that swallows every query; skipped where namespaces are
 *   not allowed);
 * - a server that answers with a header announcing a huge array or bulk string gets
 *   RLOCK_EPROTO at once, before hiredis' reader allocates what the header announces (under
 *   ASan a multi-gigabyte calloc would be reported).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE // NOLINT(bugprone-reserved-identifier): unshare() and CLONE_NEW*
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tc_redis.h"

/* ---- a DNS server that never answers ------------------------------------------------- */

#define SKIP_CODE 77

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ssize_t n = fd >= 0 ? write(fd, text, strlen(text)) : -1;
    if (fd >= 0) {
        close(fd);
    }
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Own network and mount namespaces (as root, or as the owner of a new user namespace). */
static int enter_namespaces(void)
{
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) == 0) {
        return 0;
    }
    uid_t uid = getuid();
    gid_t gid = getgid();
    char map[64];
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0) {
        return -1;
    }
    (void)write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
    int r = write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
    return r == 0 ? write_file("/proc/self/gid_map", map) : -1;
}

/* The new network namespace's loopback starts down. */
static int loopback_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int r = fd >= 0 ? ioctl(fd, SIOCGIFFLAGS, &ifr) : -1;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = r == 0 ? ioctl(fd, SIOCSIFFLAGS, &ifr) : -1;
    if (fd >= 0) {
        close(fd);
    }
    return r;
}

/* /etc/resolv.conf, in this mount namespace only, names 127.0.0.1 with a 1 s timeout, where a
 * UDP socket takes every query and answers none. Returns the socket, or -1. */
static int blackhole_dns(void)
{
    char tmp[] = "/tmp/rlock-resolv.XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        return -1;
    }
    close(fd);
    int r = write_file(tmp, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
    r = r == 0 ? mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) : -1;
    r = r == 0 ? mount(tmp, "/etc/resolv.conf", NULL, MS_BIND, NULL) : -1;
    unlink(tmp);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int s = r == 0 ? socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(s);
        s = -1;
    }
    return s;
}

/* How long a lookup of name takes here (ms). */
static int64_t lookup_ms(const char *name)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    int64_t t0 = rh_now_ms();
    if (getaddrinfo(name, "6379", &hints, &res) == 0) {
        freeaddrinfo(res);
    }
    return rh_now_ms() - t0;
}

/* In the child: rlock_client_new() on a name that cannot resolve in time fails within
 * connect_timeout_ms + 200 ms; then the lookup itself is shown to be slow here (else the check
 * would prove nothing). Exit codes: 0 pass, 77 no namespaces, others name the failed check. */
static int resolve_child(void *arg)
{
    (void)arg;
    if (enter_namespaces() != 0 || loopback_up() != 0) {
        fprintf(stderr, "no network/mount namespace here (%s): skipped\n", strerror(errno));
        return SKIP_CODE;
    }
    int dns = blackhole_dns();
    if (dns < 0) {
        fprintf(stderr, "cannot replace /etc/resolv.conf here (%s): skipped\n", strerror(errno));
        return SKIP_CODE;
    }
    rlock_options o;
    rlock_options_init(&o);
    o.url = "redis://rlock-blackhole.test:6379";
    o.connect_timeout_ms = 300;
    rlock_client *c = NULL;
    int64_t t0 = rh_now_ms();
    int r = rlock_client_new(&o, &c);
    int64_t took = rh_now_ms() - t0;
    fprintf(stderr, "%s: %d after %lld ms (%s)\n", o.url, r, (long long)took, rlock_last_error());
    if (r != RLOCK_ECONN || took >= 300 + 200) {
        return 1;
    }
    if (strstr(rlock_last_error(), "did not resolve within connect_timeout_ms") == NULL) {
        return 2;
    }
    int64_t slow = lookup_ms("rlock-blackhole-2.test");
    fprintf(stderr, "a lookup here takes %lld ms\n", (long long)slow);
    close(dns);
    return slow >= 1000 ? 0 : 3;
}

static void test_resolver_bounded(void **state)
{
    (void)state;
    pid_t pid = rh_fork_child(resolve_child, NULL);
    assert_true(pid > 0);
    int code = rh_wait_child(pid, 30000);
    if (code == SKIP_CODE) {
        skip();
    }
    assert_int_equal(code, 0);
}

/* ---- a server that announces huge replies ----------------------------------------------- */

typedef struct fake_server {
    int fd;
    int port;
    const char *reply; /* written whole for every read of a request */
    atomic_int stop;
    pthread_t thread;
} fake_server;

/* Answers whatever a connection sends with the reply, until it closes or the test stops. */
static void fake_serve(fake_server *f, int conn)
{
    char buf[4096];
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = conn, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        if (recv(conn, buf, sizeof(buf), 0) <= 0 ||
            send(conn, f->reply, strlen(f->reply), MSG_NOSIGNAL) < 0) {
            return;
        }
    }
}

static void *fake_main(void *arg)
{
    fake_server *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        int conn = accept(f->fd, NULL, NULL);
        if (conn >= 0) {
            fake_serve(f, conn);
            close(conn);
        }
    }
    return NULL;
}

static void fake_start(fake_server *f, const char *reply)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(f, 0, sizeof(*f));
    f->reply = reply;
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->fd >= 0);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f->fd, 8), 0);
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&sa, &len), 0);
    f->port = ntohs(sa.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake_server *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    close(f->fd);
}

/* rlock_client_new() (its PING) against a server answering reply: RLOCK_EPROTO naming why. */
static void expect_refused(const char *reply, const char *why)
{
    fake_server f;
    fake_start(&f, reply);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", f.port);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 5000;
    rlock_client *c = NULL;
    int r = rlock_client_new(&o, &c);
    print_message("%s -> %d %s\n", reply, r, r ? rlock_last_error() : "");
    fake_stop(&f);
    rlock_client_free(c);
    assert_int_equal(r, RLOCK_EPROTO);
    if (strstr(rlock_last_error(), why) == NULL) {
        fail_msg("\"%s\" not in \"%s\"", why, rlock_last_error());
    }
}

static void test_huge_array_refused(void **state)
{
    (void)state;
    expect_refused("*444444443\r\n", "an array of more than 1048576 elements");
    /* Nested: the outer array is small, the one inside is not. */
    expect_refused("*2\r\n:1\r\n*2000000000\r\n", "an array of more than 1048576 elements");
    /* A negative count other than -1, which hiredis would take as a huge unsigned one. */
    expect_refused("*-2\r\n", "is not a count");
}

static void test_huge_bulk_refused(void **state)
{
    (void)state;
    expect_refused("$99999999999\r\n", "a bulk string of more than 536870912 bytes");
}

TC_MAIN(NULL, NULL,
        /* First: the child is forked while this process has no thread of its own yet. */
        cmocka_unit_test(test_resolver_bounded), cmocka_unit_test(test_huge_array_refused),
        cmocka_unit_test(test_huge_bulk_refused))
