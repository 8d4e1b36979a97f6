/*
 * Acceptance tests of the client object against real redis-server processes: option defaults and
 * validation, URL errors, AUTH (password and ACL user), SELECT, unreachable and hung servers,
 * and the error table.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "error.h"
#include "tc_redis.h"
#include "util.h"
#include "pool.h"
#include "route.h"

/* Creates a client for url with the given timeouts; returns the rlock code and its duration. */
static int try_client(const char *url, int64_t timeout_ms, int64_t *elapsed_ms, rlock_client **out)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    o.pool_size = 2;
    o.connect_timeout_ms = timeout_ms;
    o.command_timeout_ms = timeout_ms;
    rlk_err_clear();
    int64_t t0 = rh_now_ms();
    int r = rlock_client_new(&o, out);
    *elapsed_ms = rh_now_ms() - t0;
    return r;
}

/* try_client() on the URL url_fmt gives with s's port for its one %d. */
static int try_client_at(const rh_server *s, const char *url_fmt, int64_t timeout_ms,
                         int64_t *elapsed_ms, rlock_client **out)
{
    char url[256];
    snprintf(url, sizeof(url), url_fmt, rh_port(s));
    return try_client(url, timeout_ms, elapsed_ms, out);
}

/* Runs one command through the client's pool and returns its reply as a string (malloc'd). */
static char *client_cmd_str(rlock_client *c, const char *a0, const char *a1)
{
    rlk_args a;
    rlk_args_init(&a);
    rlk_args_adds(&a, a0);
    if (a1 != NULL) {
        rlk_args_adds(&a, a1);
    }
    redisReply *r = NULL;
    if (rlk_cmd(c, RLK_IDEMPOTENT, &a, &r) != RLOCK_OK) {
        return NULL;
    }
    char *s = NULL;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        s = strdup(r->str);
    }
    freeReplyObject(r);
    return s;
}

static void test_option_defaults(void **state)
{
    (void)state;
    rlock_options o;
    memset(&o, 0xA5, sizeof(o));
    rlock_options_init(&o);
    assert_string_equal(o.url, "redis://127.0.0.1:6379");
    assert_int_equal(o.pool_size, 64);
    assert_int_equal(o.connect_timeout_ms, 10000);
    assert_int_equal(o.command_timeout_ms, 3000);
    assert_int_equal(o.watchdog_timeout_ms, 30000);
    assert_int_equal(o.fair_wait_ms, 300000);
    assert_int_equal(o.waiter_timeout_ms, 5000);
    assert_int_equal(o.subscription_timeout_ms, 7500);
    assert_int_equal(o.redlock_server_timeout_ms, 50);
    assert_int_equal(o.rw_reader_preferring, 0);
    assert_null(o.log_fn);
    assert_int_equal(o.log_level, RLOCK_LOG_WARN);
    assert_null(o.on_lost);
    assert_null(o.user_data);
    for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++) {
        assert_null(o.reserved[i]);
    }
    rlock_options_init(NULL); /* documented as harmless */
}

/* Each mutation must be rejected before any connection is attempted, with a message that names
 * the offending option. */
static void test_bad_options(void **state)
{
    rh_server *s = *state;
    static const struct {
        const char *what;
        size_t off;
        int64_t value;
    } cases[] = {
        {"pool_size", offsetof(rlock_options, pool_size), 0},
        {"pool_size", offsetof(rlock_options, pool_size), -3},
        {"pool_size", offsetof(rlock_options, pool_size), 100000},
        {"connect_timeout_ms", offsetof(rlock_options, connect_timeout_ms), -1},
        {"connect_timeout_ms", offsetof(rlock_options, connect_timeout_ms), 0},
        {"command_timeout_ms", offsetof(rlock_options, command_timeout_ms), -200},
        {"command_timeout_ms", offsetof(rlock_options, command_timeout_ms),
         RLOCK_MAX_DURATION_MS + 1},
        {"watchdog_timeout_ms", offsetof(rlock_options, watchdog_timeout_ms), 0},
        {"watchdog_timeout_ms", offsetof(rlock_options, watchdog_timeout_ms), -30000},
        {"waiter_timeout_ms", offsetof(rlock_options, waiter_timeout_ms), 0},
        {"subscription_timeout_ms", offsetof(rlock_options, subscription_timeout_ms), -1},
        {"fair_wait_ms", offsetof(rlock_options, fair_wait_ms), -5},
        {"redlock_server_timeout_ms", offsetof(rlock_options, redlock_server_timeout_ms), 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rlock_options o;
        cu_opts(&o, s);
        char *field = (char *)&o + cases[i].off;
        if (cases[i].off == offsetof(rlock_options, pool_size)) {
            int v = (int)cases[i].value;
            memcpy(field, &v, sizeof(v));
        } else {
            memcpy(field, &cases[i].value, sizeof(int64_t));
        }
        rlock_client *c = (rlock_client *)&o; /* must be reset to NULL on failure */
        rlk_err_clear();
        int r = rlock_client_new(&o, &c);
        if (r != RLOCK_EINVAL || c != NULL || strstr(rlock_last_error(), cases[i].what) == NULL) {
            fail_msg("case %zu (%s): r=%d c=%p msg='%s'", i, cases[i].what, r, (void *)c,
                     rlock_last_error());
        }
    }
    rlk_err_clear();
    assert_int_equal(rlock_client_new(NULL, NULL), RLOCK_EINVAL);
    assert_true(rlock_last_error()[0] != '\0');
    /* The baseline options are good: the rejections above were the mutations' doing. */
    rlock_client *c = cu_client(s);
    assert_non_null(c);
    rlock_client_free(c);
}

static void test_bad_urls(void **state)
{
    (void)state;
    const char *bad[] = {NULL,
                         "",
                         "http://127.0.0.1:6379",
                         "redis://127.0.0.1:99999",
                         "redis://127.0.0.1:port",
                         "redis://127.0.0.1:6379/db",
                         "redis://",
                         "unix://relative/path",
                         "redis://127.0.0.1:6379/-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rlock_options o;
        rlock_options_init(&o);
        o.url = bad[i];
        rlock_client *c = NULL;
        rlk_err_clear();
        int64_t t0 = rh_now_ms();
        int r = rlock_client_new(&o, &c);
        int64_t dt = rh_now_ms() - t0;
        if (r != RLOCK_EINVAL || c != NULL || rlock_last_error()[0] == '\0' || dt > 100) {
            fail_msg("url '%s': r=%d msg='%s' %lld ms", bad[i] ? bad[i] : "(null)", r,
                     rlock_last_error(), (long long)dt);
        }
    }
}

static void test_password(void **state)
{
    (void)state;
    const char *extra[] = {"--requirepass", "s3cret", NULL};
    rh_server *s = cu_start(extra);
    assert_non_null(s);
    rlock_client *c = NULL;
    int64_t dt = 0;

    assert_int_equal(try_client_at(s, "redis://:wrong@127.0.0.1:%d", 500, &dt, &c), RLOCK_EAUTH);
    assert_null(c);
    assert_true(dt < 500);
    /* Redis' own text is part of the detail. */
    assert_non_null(strstr(rlock_last_error(), "WRONGPASS"));

    /* No password at all against a server that requires one is an authentication failure too:
     * the client must not pretend to be usable. */
    int r = try_client_at(s, "redis://127.0.0.1:%d", 500, &dt, &c);
    if (r != RLOCK_EAUTH) {
        rlock_client_free(c);
        fail_msg("no password: expected RLOCK_EAUTH, got %d (%s)", r, rlock_last_error());
    }

    assert_int_equal(try_client_at(s, "redis://:s3cret@127.0.0.1:%d", 500, &dt, &c), RLOCK_OK);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "pw-lock");
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_close_own(l, c);
    rh_free(s);
}

static void test_acl_user(void **state)
{
    rh_server *s = *state;
    const char *setuser[] = {"ACL", "SETUSER", "rlk_user", "on", ">pw%1",
                             "~*",  "&*",      "+@all",    NULL};
    char *ok = rh_cmd_str(s, setuser);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
    rlock_client *c = NULL;
    int64_t dt = 0;
    /* The password is percent-encoded in the URL ("%25" is '%'). */
    assert_int_equal(try_client_at(s, "redis://rlk_user:pw%%251@127.0.0.1:%d", 1000, &dt, &c),
                     RLOCK_OK);
    char *who = client_cmd_str(c, "ACL", "WHOAMI");
    assert_non_null(who);
    assert_string_equal(who, "rlk_user");
    free(who);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "acl-lock");
    assert_int_equal(rlock_lock(l, 5000), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_close_own(l, c);

    assert_int_equal(try_client_at(s, "redis://rlk_user:nope@127.0.0.1:%d", 1000, &dt, &c),
                     RLOCK_EAUTH);
    assert_null(c);
    assert_int_equal(try_client_at(s, "redis://nobody:pw%%251@127.0.0.1:%d", 1000, &dt, &c),
                     RLOCK_EAUTH);
    assert_null(c);
}

static void test_db_selection(void **state)
{
    rh_server *s = *state;
    rlock_client *c = NULL;
    int64_t dt = 0;
    assert_int_equal(try_client_at(s, "redis://127.0.0.1:%d/3", 1000, &dt, &c), RLOCK_OK);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "db3-lock");
    assert_int_equal(rlock_lock(l, 20000), RLOCK_OK);
    assert_int_equal(cu_exists_in_db(s, 3, "db3-lock"), 1);
    assert_int_equal(cu_exists_in_db(s, 0, "db3-lock"), 0);
    assert_int_equal(cu_exists_in_db(s, 3, "redisson_lock_token:{db3-lock}"), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(cu_exists_in_db(s, 3, "db3-lock"), 0);
    tc_close_own(l, c);

    /* The query form selects too. */
    assert_int_equal(try_client_at(s, "redis://127.0.0.1:%d?db=5", 1000, &dt, &c), RLOCK_OK);
    l = rlock_open(c, RLOCK_REENTRANT, "db5-lock");
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    assert_int_equal(cu_exists_in_db(s, 5, "db5-lock"), 1);
    assert_int_equal(cu_exists_in_db(s, 3, "db5-lock"), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_close_own(l, c);

    /* A database the server does not have: SELECT fails when connecting. */
    assert_int_equal(try_client_at(s, "redis://127.0.0.1:%d/99", 1000, &dt, &c), RLOCK_EAUTH);
    assert_null(c);
    assert_non_null(strstr(rlock_last_error(), "DB index is out of range"));
}

static void test_dead_port(void **state)
{
    (void)state;
    rh_server *s = cu_start(NULL);
    assert_non_null(s);
    assert_int_equal(rh_stop(s), 0);
    rlock_client *c = NULL;
    int64_t dt = 0;
    assert_int_equal(try_client_at(s, "redis://127.0.0.1:%d", 2000, &dt, &c), RLOCK_ECONN);
    assert_null(c);
    assert_true(rlock_last_error()[0] != '\0');
    /* Connection refused is immediate: far below the 2 s connect timeout. */
    assert_true(dt < 300);
    rh_free(s);
}

/* A SIGSTOPped server accepts TCP connections (the kernel completes the handshake) but never
 * answers. Creating a client must fail within the connect timeout, and a live client's calls
 * within the command timeout; nothing may hang. */
static void test_paused_server(void **state)
{
    (void)state;
    rh_server *s = cu_start(NULL);
    assert_non_null(s);
    rlock_options o;
    cu_opts(&o, s);
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 300;
    rlock_client *live = tc_client(&o);
    rlock *l = tc_open(live, RLOCK_REENTRANT, "paused-lock");

    assert_int_equal(rh_pause(s), 0);
    rlock_client *c = NULL;
    int64_t dt = 0;
    int r_db = try_client_at(s, "redis://127.0.0.1:%d/1", 300, &dt, &c);
    int64_t dt_db = dt;
    int r_plain = try_client(rh_url(s), 300, &dt, &c);
    int64_t dt_plain = dt;
    rlock_client_free(c);

    int64_t t0 = rh_now_ms();
    int r_lock = rlock_try_lock(l, 0, 5000);
    int64_t dt_lock = rh_now_ms() - t0;
    t0 = rh_now_ms();
    int r_locked = rlock_is_locked(l);
    int64_t dt_locked = rh_now_ms() - t0;
    assert_int_equal(rh_resume(s), 0);

    print_message("paused: client_new(/1) %d in %lld ms, client_new %d in %lld ms, "
                  "try_lock %d in %lld ms, is_locked %d in %lld ms\n",
                  r_db, (long long)dt_db, r_plain, (long long)dt_plain, r_lock, (long long)dt_lock,
                  r_locked, (long long)dt_locked);
    /* Connecting is bounded by the connect timeout, a command on an open connection by the
     * command timeout (it cannot fail sooner); a later call may fail faster (the pool backs off
     * after a failed dial) but never later. */
    assert_int_equal(r_db, RLOCK_ECONN);
    assert_in_range(dt_db, 250, 300 + 400);
    assert_int_equal(r_plain, RLOCK_ECONN);
    assert_in_range(dt_plain, 250, 300 + 400);
    assert_int_equal(r_lock, RLOCK_ECONN);
    assert_in_range(dt_lock, 290, 300 + 400);
    assert_int_equal(r_locked, RLOCK_ECONN);
    assert_in_range(dt_locked, 0, 300 + 400);

    /* Resumed: the same client works again on a fresh connection (after the dial backoff). */
    rlock *l2 = rlock_open(live, RLOCK_REENTRANT, "after-pause");
    int64_t took = 0;
    assert_int_equal(cu_lock_works_within(l2, 1500, &took), RLOCK_OK);
    print_message("working again %lld ms after the resume\n", (long long)took);
    assert_int_equal(rlock_unlock(l2), RLOCK_OK);
    rlock_free(l2);
    rlock_free(l);
    t0 = rh_now_ms();
    rlock_client_free(live);
    assert_true(rh_now_ms() - t0 < 1500);
    rh_free(s);
}

/* Creating a client against a SIGSTOPped server: the TCP connect succeeds (the kernel answers),
 * then nothing does. The whole creation, PING included, is bounded by connect_timeout_ms, not
 * by connect + command timeout. */
static void test_new_bounded_by_connect_timeout(void **state)
{
    (void)state;
    rh_server *s = cu_start(NULL);
    assert_non_null(s);
    assert_int_equal(rh_pause(s), 0);
    rlock_options o;
    cu_opts(&o, s);
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 4000;
    rlock_client *c = NULL;
    int64_t t0 = rh_now_ms();
    int r = rlock_client_new(&o, &c);
    int64_t dt = rh_now_ms() - t0;
    assert_int_equal(rh_resume(s), 0);
    print_message("client_new against a paused server: %d (%s) in %lld ms\n", r, rlock_last_error(),
                  (long long)dt);
    assert_int_equal(r, RLOCK_ECONN);
    assert_null(c);
    assert_in_range(dt, 250, 300 + 1500); /* far below the 4 s command timeout */
    rh_free(s);
}

/* Counts the occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

/* While the pool backs off after a failed dial, calls fail fast quoting the dial's failure: the
 * code's message ("connection to Redis failed or timed out") appears once, not twice. */
static void test_backoff_message(void **state)
{
    (void)state;
    rh_server *s = cu_start(NULL);
    assert_non_null(s);
    rlock_client *c = cu_client(s);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "backoff-lock");
    assert_int_equal(rh_stop(s), 0);
    int backoff_seen = 0;
    for (int i = 0; i < 50 && !backoff_seen; i++) {
        assert_int_equal(rlock_try_lock(l, 0, 5000), RLOCK_ECONN);
        const char *msg = rlock_last_error();
        backoff_seen = strstr(msg, "next reconnect attempt") != NULL;
        if (backoff_seen) {
            print_message("%s\n", msg);
            assert_int_equal(count_of(msg, rlock_strerror(RLOCK_ECONN)), 1);
        }
    }
    assert_true(backoff_seen);
    tc_close_own(l, c);
    rh_free(s);
}

static void test_strerror_and_version(void **state)
{
    (void)state;
    const char *seen[-RLOCK_EREPLICA + 1];
    for (int code = 0; code >= RLOCK_EREPLICA; code--) {
        const char *m = rlock_strerror(code);
        assert_non_null(m);
        assert_true(m[0] != '\0');
        assert_string_not_equal(m, "unknown error code");
        for (int j = 0; j < -code; j++) {
            assert_string_not_equal(m, seen[j]);
        }
        seen[-code] = m;
    }
    int unknown[] = {1, -99, 42, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        assert_string_equal(rlock_strerror(unknown[i]), "unknown error code");
    }
    char v[32];
    snprintf(v, sizeof(v), "%d.%d.%d", RLOCK_VERSION_MAJOR, RLOCK_VERSION_MINOR,
             RLOCK_VERSION_PATCH);
    assert_string_equal(rlock_version_string(), v);
    /* The detail message starts with the code's description. */
    assert_int_equal(rlk_err(RLOCK_EPROTO, "detail %d", 7), RLOCK_EPROTO);
    assert_non_null(strstr(rlock_last_error(), rlock_strerror(RLOCK_EPROTO)));
    assert_non_null(strstr(rlock_last_error(), "detail 7"));
}

TC_MAIN(tc_require_server, NULL, cmocka_unit_test(test_option_defaults),
        TC_SERVER_TEST(test_bad_options), cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_password), TC_SERVER_TEST(test_acl_user),
        TC_SERVER_TEST(test_db_selection), cmocka_unit_test(test_dead_port),
        cmocka_unit_test(test_paused_server), cmocka_unit_test(test_new_bounded_by_connect_timeout),
        cmocka_unit_test(test_backoff_message), cmocka_unit_test(test_strerror_and_version))
