/*
 * TLS acceptance tests against real redis-server processes listening for TLS (certificates from
 * tests/tls/make_certs.sh in $RLOCK_TLS_CERTS): a lock over rediss://, mutual TLS with and
 * without the client certificate, a certificate of another CA, a name mismatch, tls_insecure,
 * an expired certificate, bad file options, and a listener that never speaks.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "tc_redis.h"

static const char *certs; /* $RLOCK_TLS_CERTS */
static char paths[8][4096];

/* dir/name in one of a few static buffers (distinct per slot). */
static const char *cert_path(int slot, const char *name)
{
    snprintf(paths[slot], sizeof(paths[slot]), "%s/%s", certs, name);
    return paths[slot];
}

/* The server a test gets: its certificate and key (NULL: the test CA's server pair), and whether
 * it asks clients for a certificate. */
typedef struct server_kind {
    const char *cert, *key;
    int auth_clients;
} server_kind;

static const server_kind k_default = {NULL, NULL, 0}, k_mutual = {NULL, NULL, 1},
                         k_other_ca = {"other_server.crt", "other_server.key", 0},
                         k_expired = {"expired.crt", "expired.key", 0};

/* A test's TLS server s and options o for it that trust the test CA, with short timeouts so
 * that a failure is quick. */
typedef struct tls_case {
    rh_server *s;
    rlock_options o;
} tls_case;

/* cmocka setup: *state, a server_kind (the test's prestate), becomes a tls_case. */
static int case_setup(void **state)
{
    const server_kind *k = *state;
    static tls_case t;
    rh_tls spec = {.dir = certs, .cert = k->cert, .key = k->key, .auth_clients = k->auth_clients};
    t.s = rh_start_tls(&spec, NULL);
    if (t.s == NULL || rh_tls_port(t.s) <= 0) {
        rh_free(t.s);
        return -1;
    }
    tc_options(&t.o, t.s);
    t.o.tls_ca_file = cert_path(0, "ca.crt");
    t.o.connect_timeout_ms = 2000;
    *state = &t;
    return 0;
}

static int case_teardown(void **state)
{
    tls_case *t = *state;
    rh_free(t->s);
    return 0;
}

/* A test on a server of kind k (its state a tls_case). */
#define TLS_TEST(f, k)                                                                             \
    cmocka_unit_test_prestate_setup_teardown(f, case_setup, case_teardown, (void *)&(k))

/* rlock_client_new's code; the client, if any, is freed. */
static int try_new(const rlock_options *o)
{
    rlock_client *c = NULL;
    int r = rlock_client_new(o, &c);
    print_message("%s -> %d %s\n", o->url, r, r ? rlock_last_error() : "");
    rlock_client_free(c);
    return r;
}

static void assert_error_has(const char *needle)
{
    if (strstr(rlock_last_error(), needle) == NULL) {
        fail_msg("\"%s\" not in \"%s\"", needle, rlock_last_error());
    }
}

/* try_new(o) gives want, with needle in rlock's message. */
static void expect_new(const rlock_options *o, int want, const char *needle)
{
    assert_int_equal(try_new(o), want);
    assert_error_has(needle);
}

/* A lock works over TLS, and the TLS port really speaks only TLS: a plain client there fails. */
static void test_lock_over_tls(void **state)
{
    tls_case *t = *state;
    rlock_client *c = tc_client(&t->o);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "tls-basic");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    const char *argv[] = {"HEXISTS", "tls-basic", NULL, NULL};
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:%llu", rlock_client_id(c),
             (unsigned long long)rlk_thread_id());
    argv[2] = owner;
    assert_int_equal(rh_cmd_int(t->s, argv), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);

    char plain[64];
    snprintf(plain, sizeof(plain), "redis://127.0.0.1:%d", rh_tls_port(t->s));
    t->o.url = plain;
    t->o.tls_ca_file = NULL;
    assert_int_equal(try_new(&t->o), RLOCK_ECONN);
}

static void test_mutual_tls(void **state)
{
    tls_case *t = *state;
    expect_new(&t->o, RLOCK_ETLS, "certificate");
    t->o.tls_cert_file = cert_path(1, "client.crt");
    t->o.tls_key_file = cert_path(2, "client.key");
    assert_int_equal(try_new(&t->o), RLOCK_OK);
    /* A client certificate of another CA is refused too. */
    t->o.tls_cert_file = cert_path(1, "other_server.crt");
    t->o.tls_key_file = cert_path(2, "other_server.key");
    assert_int_equal(try_new(&t->o), RLOCK_ETLS);
}

static void test_other_ca(void **state)
{
    tls_case *t = *state;
    expect_new(&t->o, RLOCK_ETLS, "certificate verify failed");
    /* tls_insecure connects all the same (and nothing else changed). */
    t->o.tls_insecure = 1;
    assert_int_equal(try_new(&t->o), RLOCK_OK);
    /* Trusting that CA instead works too. */
    t->o.tls_insecure = 0;
    t->o.tls_ca_file = cert_path(0, "other_ca.crt");
    assert_int_equal(try_new(&t->o), RLOCK_OK);
}

static void test_server_name(void **state)
{
    tls_case *t = *state;
    t->o.tls_server_name = "redis.example.com";
    expect_new(&t->o, RLOCK_ETLS, "certificate verify failed");
    t->o.tls_server_name = "localhost"; /* in the certificate's SAN */
    assert_int_equal(try_new(&t->o), RLOCK_OK);
    t->o.tls_server_name = "127.0.0.2"; /* an address the certificate does not carry */
    assert_int_equal(try_new(&t->o), RLOCK_ETLS);
    t->o.tls_server_name = NULL;
    t->o.tls_insecure = 1;
    t->o.tls_ca_file = NULL; /* the system store does not know the test CA: insecure skips it */
    assert_int_equal(try_new(&t->o), RLOCK_OK);
}

static void test_expired(void **state)
{
    tls_case *t = *state;
    expect_new(&t->o, RLOCK_ETLS, "expired");
}

/* Bad file options fail at rlock_client_new with RLOCK_EINVAL naming the file, before any
 * connection is tried (the URL points nowhere). */
static void test_bad_files(void **state)
{
    (void)state;
    rlock_options o;
    rlock_options_init(&o);
    o.url = "rediss://127.0.0.1:1";
    o.tls_ca_file = "/nonexistent/ca.pem";
    expect_new(&o, RLOCK_EINVAL, "/nonexistent/ca.pem");
    o.tls_ca_file = cert_path(0, "ca.key"); /* a key is not a certificate */
    expect_new(&o, RLOCK_EINVAL, "tls_ca_file");
    o.tls_ca_file = cert_path(0, "ca.crt");
    o.tls_cert_file = cert_path(1, "client.crt");
    expect_new(&o, RLOCK_EINVAL, "tls_key_file"); /* no key */
    o.tls_key_file = cert_path(2, "server.key");  /* not the certificate's key */
    expect_new(&o, RLOCK_EINVAL, "server.key");
    o.tls_key_file = cert_path(2, "missing.key");
    expect_new(&o, RLOCK_EINVAL, "missing.key");
    o.tls_key_file = cert_path(2, "client.crt"); /* a certificate is not a key */
    expect_new(&o, RLOCK_EINVAL, "tls_key_file");
    /* With good files the failure is the connection's, no longer the options'. */
    o.tls_key_file = cert_path(2, "client.key");
    assert_int_equal(try_new(&o), RLOCK_ECONN);
}

/* A listener whose backlog completes TCP connections that nobody ever answers: rlock_client_new
 * fails within connect_timeout_ms + 200 ms, over TLS (the handshake) and plain (the PING). */
static void test_silent_listener(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 64), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    const char *schemes[] = {"rediss", "redis"};
    for (int i = 0; i < 2; i++) {
        char url[64];
        snprintf(url, sizeof(url), "%s://127.0.0.1:%d", schemes[i], ntohs(sa.sin_port));
        rlock_options o;
        rlock_options_init(&o);
        o.url = url;
        o.tls_ca_file = cert_path(0, "ca.crt");
        o.connect_timeout_ms = 500;
        int64_t t0 = rh_now_ms();
        int r = try_new(&o);
        int64_t took = rh_now_ms() - t0;
        print_message("%s: %d after %lld ms\n", url, r, (long long)took);
        assert_true(r == RLOCK_ECONN || r == RLOCK_ETLS);
        assert_true(took < 500 + 200);
    }
    close(fd);
}

int main(void)
{
    rh_skip_if_unavailable();
    certs = getenv("RLOCK_TLS_CERTS");
    if (certs == NULL) {
        fprintf(stderr, "RLOCK_TLS_CERTS is not set (the tls_certs fixture makes them)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        TLS_TEST(test_lock_over_tls, k_default), TLS_TEST(test_mutual_tls, k_mutual),
        TLS_TEST(test_other_ca, k_other_ca),     TLS_TEST(test_server_name, k_default),
        TLS_TEST(test_expired, k_expired),       cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_silent_listener),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
