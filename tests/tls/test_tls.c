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

#include "internal.h"
#include "tc_redis.h"

static const char *certs; /* $RLOCK_TLS_CERTS */
static char paths[8][4096];

/* dir/name in one of a few static buffers (distinct per slot). */
static const char *cert_path(int slot, const char *name)
{
    snprintf(paths[slot], sizeof(paths[slot]), "%s/%s", certs, name);
    return paths[slot];
}

static rh_server *start(const char *cert, const char *key, int auth_clients)
{
    rh_tls t = {.dir = certs, .cert = cert, .key = key, .auth_clients = auth_clients};
    rh_server *s = rh_start_tls(&t, NULL);
    assert_non_null(s);
    assert_true(rh_tls_port(s) > 0);
    return s;
}

/* Options for s trusting the test CA, with short timeouts so that a failure is quick. */
static void tls_opts(rlock_options *o, const rh_server *s)
{
    tc_options(o, s);
    o->tls_ca_file = cert_path(0, "ca.crt");
    o->connect_timeout_ms = 2000;
}

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

/* A lock works over TLS, and the TLS port really speaks only TLS: a plain client there fails. */
static void test_lock_over_tls(void **state)
{
    (void)state;
    rh_server *s = start(NULL, NULL, 0);
    rlock_options o;
    tls_opts(&o, s);
    rlock_client *c = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "tls-basic");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    const char *argv[] = {"HEXISTS", "tls-basic", NULL, NULL};
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:%llu", rlock_client_id(c),
             (unsigned long long)rlk_thread_id());
    argv[2] = owner;
    assert_int_equal(rh_cmd_int(s, argv), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);

    char plain[64];
    snprintf(plain, sizeof(plain), "redis://127.0.0.1:%d", rh_tls_port(s));
    o.url = plain;
    o.tls_ca_file = NULL;
    assert_int_equal(try_new(&o), RLOCK_ECONN);
    rh_free(s);
}

static void test_mutual_tls(void **state)
{
    (void)state;
    rh_server *s = start(NULL, NULL, 1);
    rlock_options o;
    tls_opts(&o, s);
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    assert_error_has("certificate");
    o.tls_cert_file = cert_path(1, "client.crt");
    o.tls_key_file = cert_path(2, "client.key");
    assert_int_equal(try_new(&o), RLOCK_OK);
    /* A client certificate of another CA is refused too. */
    o.tls_cert_file = cert_path(1, "other_server.crt");
    o.tls_key_file = cert_path(2, "other_server.key");
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    rh_free(s);
}

static void test_other_ca(void **state)
{
    (void)state;
    rh_server *s = start("other_server.crt", "other_server.key", 0);
    rlock_options o;
    tls_opts(&o, s);
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    assert_error_has("certificate verify failed");
    /* tls_insecure connects all the same (and nothing else changed). */
    o.tls_insecure = 1;
    assert_int_equal(try_new(&o), RLOCK_OK);
    /* Trusting that CA instead works too. */
    o.tls_insecure = 0;
    o.tls_ca_file = cert_path(0, "other_ca.crt");
    assert_int_equal(try_new(&o), RLOCK_OK);
    rh_free(s);
}

static void test_server_name(void **state)
{
    (void)state;
    rh_server *s = start(NULL, NULL, 0);
    rlock_options o;
    tls_opts(&o, s);
    o.tls_server_name = "redis.example.com";
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    assert_error_has("certificate verify failed");
    o.tls_server_name = "localhost"; /* in the certificate's SAN */
    assert_int_equal(try_new(&o), RLOCK_OK);
    o.tls_server_name = "127.0.0.2"; /* an address the certificate does not carry */
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    o.tls_server_name = NULL;
    o.tls_insecure = 1;
    o.tls_ca_file = NULL; /* the system store does not know the test CA: insecure skips it */
    assert_int_equal(try_new(&o), RLOCK_OK);
    rh_free(s);
}

static void test_expired(void **state)
{
    (void)state;
    rh_server *s = start("expired.crt", "expired.key", 0);
    rlock_options o;
    tls_opts(&o, s);
    assert_int_equal(try_new(&o), RLOCK_ETLS);
    assert_error_has("expired");
    rh_free(s);
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
    assert_int_equal(try_new(&o), RLOCK_EINVAL);
    assert_error_has("/nonexistent/ca.pem");
    o.tls_ca_file = cert_path(0, "ca.key"); /* a key is not a certificate */
    assert_int_equal(try_new(&o), RLOCK_EINVAL);
    assert_error_has("tls_ca_file");
    o.tls_ca_file = cert_path(0, "ca.crt");
    o.tls_cert_file = cert_path(1, "client.crt");
    assert_int_equal(try_new(&o), RLOCK_EINVAL); /* no key */
    assert_error_has("tls_key_file");
    o.tls_key_file = cert_path(2, "server.key"); /* not the certificate's key */
    assert_int_equal(try_new(&o), RLOCK_EINVAL);
    assert_error_has("server.key");
    o.tls_key_file = cert_path(2, "missing.key");
    assert_int_equal(try_new(&o), RLOCK_EINVAL);
    assert_error_has("missing.key");
    o.tls_key_file = cert_path(2, "client.crt"); /* a certificate is not a key */
    assert_int_equal(try_new(&o), RLOCK_EINVAL);
    assert_error_has("tls_key_file");
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
        cmocka_unit_test(test_lock_over_tls),   cmocka_unit_test(test_mutual_tls),
        cmocka_unit_test(test_other_ca),        cmocka_unit_test(test_server_name),
        cmocka_unit_test(test_expired),         cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_silent_listener),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
