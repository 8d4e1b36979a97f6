/*
 * A loop client's connections through an adapter (tl_loop.h) against real redis-servers: TLS
 * (a lock taken, a waiter woken by the release's message over the TLS pub/sub connection, a
 * certificate of another CA and a wrong name refused once with RLOCK_ETLS), host names
 * (localhost; a name that does not resolve), a unix socket (unix:// with a password and a
 * database; a path nobody listens on), and the data connection's back-off while the
 * server is down (requests fail with RLOCK_ECONN, few dials) and its return after a restart.
 * The certificates are those of tests/tls/make_certs.sh, in $RLOCK_TLS_CERTS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "tc_metric.h"
#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

/* The program's servers: a TLS one, a plain one (stopped and restarted by the last test) and
 * one that also listens on a unix socket (sock), with a password. */
typedef struct net_state {
    rh_server *tls;
    rh_server *plain;
    rh_server *unix_srv;
    char sock[108];
} net_state;

static const char *certs;
static char paths[3][4096];

static const char *cert_path(int slot, const char *name)
{
    snprintf(paths[slot], sizeof(paths[slot]), "%s/%s", certs, name);
    return paths[slot];
}

static void tls_options(rlock_options *o, const net_state *st)
{
    tc_options(o, st->tls);
    o->tls_ca_file = cert_path(0, "ca.crt");
    o->connect_timeout_ms = 3000;
}

/* Over TLS: a lock taken and released, and a waiter woken by the release's message (the
 * holder's watchdog TTL is 30 s, so a wake within 2 s came by pub/sub over TLS). */
static void test_tls_lock_and_wake(void **state)
{
    net_state *st = *state;
    tu_loop *l = tu_loop_new();
    rlock_options o;
    tls_options(&o, st);
    assert_non_null(strstr(o.url, "rediss://"));
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "net-tls");
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    assert_int_equal(tl_lock_once(l, lk, a, 20, NULL), RLOCK_OK);
    tl_done w = {0};
    assert_int_equal(tl_lock_async(lk, b, 10000, -1, NULL, &w), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(w.calls, 0);
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, lk, a, RLOCK_OK);
    assert_true(tu_run_until(l, &w.calls, 1, 5000));
    assert_int_equal(w.rc, RLOCK_OK);
    assert_true(w.at_ms - t0 < 2000);
    tl_unlock_now(l, lk, b, RLOCK_OK);
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A handshake the client refuses completes the pending operation once with RLOCK_ETLS, and
 * the message says why (want). */
static void expect_tls_refused(const rlock_options *o, const char *want)
{
    tu_loop *l = tu_loop_new();
    rlock_client *c = tl_client(l, o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "net-tls-bad");
    rlock_owner *a = tl_owner(c);
    tl_done d;
    assert_int_equal(tl_lock_once(l, lk, a, 100, &d), RLOCK_ETLS);
    assert_int_equal(d.calls, 1); /* started, and ended by its done */
    if (strstr(d.msg, want) == NULL) {
        fail_msg("the message \"%s\" does not say \"%s\"", d.msg, want);
    }
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

static void test_tls_refused(void **state)
{
    net_state *st = *state;
    rlock_options o;
    tls_options(&o, st);
    o.tls_ca_file = cert_path(0, "other_ca.crt");
    expect_tls_refused(&o, "certificate");
    tls_options(&o, st);
    o.tls_server_name = "not-the-server.example";
    expect_tls_refused(&o, "not-the-server.example");
}

/* localhost is looked up off the loop (and its addresses tried in turn: ::1 may be refused);
 * a name that does not resolve fails the request with RLOCK_ECONN, within connect_timeout_ms. */
static void test_host_names(void **state)
{
    net_state *st = *state;
    tu_loop *l = tu_loop_new();
    char url[64];
    snprintf(url, sizeof(url), "redis://localhost:%d", rh_port(st->plain));
    rlock_options o;
    tc_options_url(&o, url);
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "net-localhost");
    rlock_owner *a = tl_owner(c);
    assert_int_equal(tl_lock_once(l, lk, a, 20, NULL), RLOCK_OK);
    tl_unlock_now(l, lk, a, RLOCK_OK);
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);

    tc_options_url(&o, "redis://no-such-host.invalid:6379");
    o.connect_timeout_ms = 1000;
    c = tl_client(l, &o);
    lk = tc_open(c, RLOCK_REENTRANT, "net-nohost");
    assert_int_equal(rlock_owner_new(c, &a), RLOCK_OK);
    assert_int_equal(tl_lock_once(l, lk, a, 20, NULL), RLOCK_ECONN);
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* 1 when the lock's hash is in database db of s, as the admin connection sees it. */
static int key_in_db(const rh_server *s, const char *db, const char *key)
{
    redisContext *ac = rh_connect(s);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "SELECT %s", db);
    assert_non_null(r);
    freeReplyObject(r);
    r = redisCommand(ac, "EXISTS %s", key);
    assert_non_null(r);
    int in = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    redisFree(ac);
    return in;
}

/* Over a unix socket, with a password and a database (unix://:pw@/path?db=3): a lock taken
 * (its hash in database 3), a waiter woken by the release's message on the unix pub/sub
 * connection; a socket path nobody listens on fails the creation with RLOCK_ECONN. */
static void test_unix_socket(void **state)
{
    net_state *st = *state;
    tu_loop *l = tu_loop_new();
    char url[256];
    snprintf(url, sizeof(url), "unix://:unixpw@%s?db=3", st->sock);
    rlock_options o;
    tc_options_url(&o, url);
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "net-unix");
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    assert_int_equal(tl_lock_once(l, lk, a, 20, NULL), RLOCK_OK);
    assert_true(key_in_db(st->unix_srv, "3", "net-unix"));
    tl_done w = {0};
    assert_int_equal(tl_lock_async(lk, b, 10000, -1, NULL, &w), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(w.calls, 0);
    int64_t t0 = tl_now_ms();
    tl_unlock_now(l, lk, a, RLOCK_OK);
    assert_true(tu_run_until(l, &w.calls, 1, 5000));
    assert_int_equal(w.rc, RLOCK_OK);
    assert_true(w.at_ms - t0 < 2000); /* the watchdog TTL is 30 s: the message woke it */
    tl_unlock_now(l, lk, b, RLOCK_OK);
    assert_false(key_in_db(st->unix_srv, "3", "net-unix"));
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_free(lk);
    rlock_client_free(c);

    /* A unix socket refuses at once: the creation fails, naming the path. */
    snprintf(url, sizeof(url), "unix://%s.none", st->sock);
    tc_options_url(&o, url);
    c = NULL;
    assert_int_equal(tu_client_new(l, &o, &c), RLOCK_ECONN);
    assert_null(c);
    if (strstr(rlock_last_error(), ".none") == NULL) {
        fail_msg("the message \"%s\" does not name the path", rlock_last_error());
    }
    assert_int_equal(tu_loop_close(l), 0);
}

/* Requests every 10 ms for ms: each fails with RLOCK_ECONN (returned, or given to its done). */
static int fail_for(tu_loop *l, rlock *lk, rlock_owner *o, int64_t ms)
{
    static tl_done recs[400];
    int n = 0;
    for (int64_t end = tl_now_ms() + ms; tl_now_ms() < end && n < 400; n++) {
        recs[n] = (tl_done){0};
        int rc = tl_lock_async(lk, o, 0, -1, NULL, &recs[n]);
        if (rc == RLOCK_OK) {
            assert_true(tu_run_until(l, &recs[n].calls, 1, 3000));
            rc = recs[n].rc;
        }
        assert_int_equal(rc, RLOCK_ECONN);
        tl_run_for(l, 10);
    }
    return n;
}

/* A server that is down: requests fail fast with RLOCK_ECONN and the client dials a few times
 * (rlock_reconnects), not once per request; after a restart, the next dial after the back-off
 * (at most 2 s) succeeds. */
static void test_backoff(void **state)
{
    net_state *st = *state;
    tu_loop *l = tu_loop_new();
    rlock_options o;
    tc_options(&o, st->plain);
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    rlock_client *c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "net-backoff");
    rlock_owner *a = tl_owner(c);
    assert_int_equal(tl_lock_once(l, lk, a, 20, NULL), RLOCK_OK);
    tl_unlock_now(l, lk, a, RLOCK_OK);
    long long dials0 = tc_metric(c, "rlock_reconnects_total", NULL, NULL);
    assert_true(dials0 >= 0);
    assert_int_equal(rh_stop(st->plain), 0);
    int64_t t0 = tl_now_ms();
    int requests = fail_for(l, lk, a, 1500);
    int64_t took = tl_now_ms() - t0;
    long long dials = tc_metric(c, "rlock_reconnects_total", NULL, NULL) - dials0;
    printf("back-off: %d requests failed in %lld ms, %lld dials\n", requests, (long long)took,
           dials);
    assert_true(requests >= 30); /* one every 10 ms, fewer on a loaded machine */
    assert_true(dials >= 2 && dials <= 8);
    assert_int_equal(rh_restart(st->plain), 0);
    int rc = RLOCK_ECONN;
    int64_t t1 = tl_now_ms();
    while (rc == RLOCK_ECONN && tl_now_ms() - t1 < 3000) {
        rc = tl_lock_once(l, lk, a, 20, NULL);
        tl_run_for(l, rc == RLOCK_ECONN ? 20 : 0);
    }
    printf("back-off: a lock %lld ms after the restart\n", (long long)(tl_now_ms() - t1));
    assert_int_equal(rc, RLOCK_OK);
    assert_true(tl_now_ms() - t1 < 2500);
    tl_unlock_now(l, lk, a, RLOCK_OK);
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

static int group_setup(void **state)
{
    static net_state st;
    certs = getenv("RLOCK_TLS_CERTS");
    if (certs == NULL || certs[0] == '\0') {
        fprintf(stderr, "RLOCK_TLS_CERTS is not set\n");
        return -1;
    }
    rh_tls t = {.dir = certs};
    st.tls = rh_start_tls(&t, NULL);
    st.plain = rh_start(NULL);
    snprintf(st.sock, sizeof(st.sock), "/tmp/rlock-loop-net-%d.sock", (int)getpid());
    const char *unix_args[] = {"--unixsocket", st.sock, "--requirepass", "unixpw", NULL};
    st.unix_srv = rh_start(unix_args);
    *state = &st;
    return st.tls != NULL && st.plain != NULL && st.unix_srv != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    net_state *st = *state;
    rh_free(st->tls);
    rh_free(st->plain);
    rh_free(st->unix_srv);
    (void)unlink(st->sock);
    return 0;
}

TC_MAIN(group_setup, group_teardown, cmocka_unit_test(test_tls_lock_and_wake),
        cmocka_unit_test(test_tls_refused), cmocka_unit_test(test_host_names),
        cmocka_unit_test(test_unix_socket), cmocka_unit_test(test_backoff))
