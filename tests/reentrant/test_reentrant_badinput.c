/*
 * Bad input and edge values on the reentrant lock. Every rejected call returns its documented
 * RLOCK_E* code (or NULL for rlock_open) and leaves a detail message that starts with the code's
 * rlock_strerror() text; nothing crashes, hangs or leaks (this program also runs under
 * ASan+UBSan, whose leak checker runs at exit). Names are binary-safe: spaces, CRLF and every
 * byte 0x01..0xFF lock, wait and unlock correctly, checked on Redis with binary-safe commands.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "util.h"
#include "re_common.h"
#include "tc_thread.h"

static rh_server *g_srv;
static rlock_client *g_c;
static redisContext *g_ctx; /* binary-safe admin connection of the main thread */

TC_FIXTURE_RAW(g_srv, g_c, g_ctx)

/* The detail message of the last failure names the code's meaning. */
static void assert_last_error_is(int code)
{
    const char *msg = rlock_last_error();
    const char *what = rlock_strerror(code);
    assert_true(strlen(msg) > strlen(what));
    assert_memory_equal(msg, what, strlen(what));
}

#define EXPECT_ERR(expr, code)                                                                     \
    do {                                                                                           \
        rlk_err_clear();                                                                           \
        assert_int_equal((expr), (code));                                                          \
        assert_last_error_is(code);                                                                \
    } while (0)

#define EXPECT_OPEN_FAILS(expr, code)                                                              \
    do {                                                                                           \
        rlk_err_clear();                                                                           \
        assert_null(expr);                                                                         \
        assert_last_error_is(code);                                                                \
    } while (0)

/* Every call on handle l (a try_lock with lease_ms) fails with code and says so in the last
 * error; its token reads 0. */
static void expect_calls_fail(rlock *l, int code, int64_t lease_ms)
{
    EXPECT_ERR(rlock_lock(l, -1), code);
    EXPECT_ERR(rlock_try_lock(l, 0, lease_ms), code);
    EXPECT_ERR(rlock_unlock(l), code);
    EXPECT_ERR(rlock_force_unlock(l), code);
    EXPECT_ERR(rlock_is_locked(l), code);
    EXPECT_ERR(rlock_is_held(l), code);
    EXPECT_ERR(rlock_hold_count(l), code);
    rlk_err_clear();
    assert_true(rlock_remaining_ttl_ms(l) == RLOCK_TTL_ERROR(code));
    assert_last_error_is(code);
    assert_int_equal(rlock_token(l), 0);
}

/* ---- NULL and empty arguments ----------------------------------------------------------- */

static void test_null_and_empty(void **state)
{
    (void)state;
    EXPECT_OPEN_FAILS(rlock_open(NULL, RLOCK_REENTRANT, "x"), RLOCK_EINVAL);
    EXPECT_OPEN_FAILS(rlock_open(g_c, RLOCK_REENTRANT, NULL), RLOCK_EINVAL);
    EXPECT_OPEN_FAILS(rlock_open(g_c, RLOCK_REENTRANT, ""), RLOCK_EINVAL);
    EXPECT_OPEN_FAILS(rlock_open(g_c, (rlock_kind)99, "x"), RLOCK_EINVAL);
    expect_calls_fail(NULL, RLOCK_EINVAL, -1);
    rlock_free(NULL);
    rlock_client_free(NULL);
    rlock_client *c = (rlock_client *)1;
    rlock_options o;
    rlock_options_init(&o);
    o.url = "redis://127.0.0.1:notaport";
    EXPECT_ERR(rlock_client_new(&o, &c), RLOCK_EINVAL);
    assert_null(c);
}

/* ---- durations -------------------------------------------------------------------------- */

static void test_durations(void **state)
{
    (void)state;
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "re:bad:durations");
    EXPECT_ERR(rlock_try_lock(l, -1, -1), RLOCK_EINVAL);
    EXPECT_ERR(rlock_try_lock(l, INT64_MIN, 1000), RLOCK_EINVAL);
    EXPECT_ERR(rlock_lock(l, 0), RLOCK_EINVAL);
    EXPECT_ERR(rlock_try_lock(l, 0, 0), RLOCK_EINVAL);
    EXPECT_ERR(rlock_lock(l, INT64_MAX), RLOCK_EINVAL);
    EXPECT_ERR(rlock_try_lock(l, 100, INT64_MAX), RLOCK_EINVAL);
    EXPECT_ERR(rlock_lock(l, RLOCK_MAX_DURATION_MS + 1), RLOCK_EINVAL);
    assert_int_equal(rlock_is_locked(l), 0); /* nothing reached Redis */

    /* The largest lease is accepted and is a real expiry. */
    assert_int_equal(rlock_lock(l, RLOCK_MAX_DURATION_MS), RLOCK_OK);
    int64_t ttl = rlock_remaining_ttl_ms(l);
    assert_true(ttl > RLOCK_MAX_DURATION_MS - 60000 && ttl <= RLOCK_MAX_DURATION_MS);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);

    /* INT64_MAX as a wait means forever: immediate on a free lock... */
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(l, INT64_MAX, -1), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 1000);
    /* ...and a real wait (no overflow into "already expired") on a held one. */
    tc_holder w;
    tc_holder_start(&w, l, INT64_MAX, 20000, 0);
    rh_sleep_ms(300);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_holder_join(&w);
    assert_int_equal(w.rc, RLOCK_OK);
    int64_t took = w.got_at - w.started_at;
    assert_true(took >= 250 && took < 2000);
    rlock_free(l);
}

/* ---- unlock misuse ---------------------------------------------------------------------- */

static void test_unlock_twice(void **state)
{
    (void)state;
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "re:bad:twice");
    EXPECT_ERR(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    EXPECT_ERR(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
}

/* ---- names ------------------------------------------------------------------------------ */

/* Redisson's derived key: "prefix:{name}", or "prefix:name" when the name has a '{'. */
static size_t derived(char *out, const char *prefix, const char *name, size_t n)
{
    int tagged = memchr(name, '{', n) != NULL;
    size_t k = (size_t)sprintf(out, "%s:%s", prefix, tagged ? "" : "{");
    memcpy(out + k, name, n);
    k += n;
    if (!tagged) {
        out[k++] = '}';
    }
    return k;
}

static long long bin_cmd(const char *cmd, const char *key, size_t klen, const char *arg,
                         size_t alen)
{
    const char *argv[3] = {cmd, key, arg};
    size_t lens[3] = {strlen(cmd), klen, alen};
    redisReply *r = redisCommandArgv(g_ctx, arg != NULL ? 3 : 2, argv, lens);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER  ? r->integer
                  : r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10)
                                                  : -1000;
    freeReplyObject(r);
    return v;
}

/* Locks name, checks its hash, field count and token key byte for byte on Redis, lets another
 * thread wait for it through the name's channel, and checks everything is released. */
static void check_name_roundtrip(const char *name)
{
    size_t n = strlen(name);
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(l, 20000), RLOCK_OK);
    assert_int_equal(bin_cmd("EXISTS", name, n, NULL, 0), 1);
    assert_int_equal(bin_cmd("HLEN", name, n, NULL, 0), 1);
    char *tk = malloc(n + 64);
    assert_non_null(tk);
    size_t tkn = derived(tk, "redisson_lock_token", name, n);
    assert_int_equal(bin_cmd("GET", tk, tkn, NULL, 0), (long long)rlock_token(l));
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_hold_count(l), 1);

    tc_holder w;
    tc_holder_start(&w, l, 10000, 20000, 0);
    rh_sleep_ms(200);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(tc_holder_join(&w), RLOCK_OK);
    /* Woken by the unlock message, not the 20 s lease. */
    assert_true(w.got_at - w.started_at < 2000);
    assert_int_equal(bin_cmd("EXISTS", name, n, NULL, 0), 0);
    assert_int_equal(bin_cmd("GET", tk, tkn, NULL, 0), 2);
    free(tk);
    rlock_free(l);
}

static void test_binary_names(void **state)
{
    (void)state;
    check_name_roundtrip("a name with spaces");
    check_name_roundtrip("crlf\r\nSET injected 1\r\n*1\r\n$4\r\nPING\r\n");
    char all[256];
    for (int i = 1; i < 256; i++) {
        all[i - 1] = (char)i;
    }
    all[255] = '\0';
    check_name_roundtrip(all);
    const char *injected[] = {"EXISTS", "injected", NULL};
    assert_int_equal(rh_cmd_int(g_srv, injected), 0);
    assert_int_equal(re_wait_no_channels(g_srv, 1000), 0);
}

#define MIB ((size_t)1024 * 1024)

static void test_name_length_limit(void **state)
{
    (void)state;
    char *name = malloc(MIB + 2);
    assert_non_null(name);
    for (size_t i = 0; i < MIB + 1; i++) {
        name[i] = (char)('a' + i % 26);
    }
    name[MIB + 1] = '\0';
    EXPECT_OPEN_FAILS(rlock_open(g_c, RLOCK_REENTRANT, name), RLOCK_EINVAL);
    name[MIB] = '\0';
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(bin_cmd("EXISTS", name, MIB, NULL, 0), 1);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(bin_cmd("EXISTS", name, MIB, NULL, 0), 0);
    rlock_free(l);
    free(name);
}

/* ---- after the client is freed ---------------------------------------------------------- */

static void test_calls_after_client_free(void **state)
{
    (void)state;
    rlock_client *c = tc_client_tuned(g_srv, 0, 0, NULL, NULL);
    rlock *held, *idle;
    tc_orphan_handles(c, "re:bad:closed", "re:bad:closed2", &held, &idle);
    rlock *both[2] = {held, idle};
    for (int i = 0; i < 2; i++) {
        rlock *l = both[i];
        expect_calls_fail(l, RLOCK_ECLOSED, 1000);
    }
    /* The client's memory lives while handles refer to it, so opening is still detectable. */
    EXPECT_OPEN_FAILS(rlock_open(c, RLOCK_REENTRANT, "re:bad:closed3"), RLOCK_ECLOSED);
    rlock_free(held);
    rlock_free(idle);
    /* The abandoned hold is no longer renewed: it expires with its 30 s lease. */
    const char *pttl[] = {"PTTL", "re:bad:closed", NULL};
    long long ttl = rh_cmd_int(g_srv, pttl);
    assert_true(ttl > 0 && ttl <= 30000);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_null_and_empty), cmocka_unit_test(test_durations),
        cmocka_unit_test(test_unlock_twice), cmocka_unit_test(test_binary_names),
        cmocka_unit_test(test_name_length_limit), cmocka_unit_test(test_calls_after_client_free))
