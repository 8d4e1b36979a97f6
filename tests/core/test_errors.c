/*
 * Acceptance tests of error paths against a real redis-server: a server that hangs mid-flight
 * (SIGSTOP), handles used after their client was freed, and a lock key of the wrong type. Each
 * must give a documented negative code with a useful detail, never a hang or a crash.
 */
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

#define CMD_TIMEOUT_MS 300

/* Every call while the server is paused fails with RLOCK_ECONN within the command timeout (plus
 * scheduling slack), including rlock_lock(), which has no wait limit of its own. */
static void test_paused_mid_flight(void **state)
{
    rh_server *s = *state;
    rlock_options o;
    cu_opts(&o, s);
    o.command_timeout_ms = CMD_TIMEOUT_MS;
    o.connect_timeout_ms = CMD_TIMEOUT_MS;
    rlock_client *c = tc_client(&o);
    rlock *held = rlock_open(c, RLOCK_REENTRANT, "mid-held");
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "mid-lock");
    assert_int_equal(rlock_lock(held, 30000), RLOCK_OK);

    assert_int_equal(rh_pause(s), 0);
    int64_t t[6];
    int r[5];
    t[0] = rh_now_ms();
    r[0] = rlock_lock(l, 10000);
    t[1] = rh_now_ms();
    r[1] = rlock_try_lock(l, 5000, 10000);
    t[2] = rh_now_ms();
    r[2] = rlock_unlock(held);
    t[3] = rh_now_ms();
    r[3] = rlock_hold_count(held);
    t[4] = rh_now_ms();
    int64_t ttl = rlock_remaining_ttl_ms(held);
    r[4] = ttl < -2 ? RLOCK_TTL_CODE(ttl) : 0;
    t[5] = rh_now_ms();
    char detail[512];
    snprintf(detail, sizeof(detail), "%s", rlock_last_error());
    assert_int_equal(rh_resume(s), 0);

    for (int i = 0; i < 5; i++) {
        print_message("paused: call %d -> %d in %lld ms\n", i, r[i], (long long)(t[i + 1] - t[i]));
    }
    /* The first call runs on the pool's open connection: it fails exactly when the command
     * timeout runs out. Later calls dial (bounded by the connect timeout) or are refused at once
     * during the pool's dial backoff; none may take longer than a timeout plus slack. */
    assert_in_range(t[1] - t[0], CMD_TIMEOUT_MS - 10, CMD_TIMEOUT_MS + 400);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r[i], RLOCK_ECONN);
        assert_in_range(t[i + 1] - t[i], 0, CMD_TIMEOUT_MS + 400);
    }
    assert_true(strstr(detail, "timed out") != NULL || strstr(detail, "reconnect") != NULL);

    /* Resumed: the client works again. (The requests that timed out were still in the paused
     * server's socket buffers and ran after the resume, so mid-lock may now be taken by this
     * thread's owner; a fresh name shows the client itself is healthy.) */
    rlock *fresh = rlock_open(c, RLOCK_REENTRANT, "mid-fresh");
    int64_t took = 0;
    assert_int_equal(cu_lock_works_within(fresh, 1500, &took), RLOCK_OK);
    print_message("working again %lld ms after the resume\n", (long long)took);
    assert_int_equal(rlock_is_held(fresh), 1);
    assert_int_equal(rlock_unlock(fresh), RLOCK_OK);
    assert_int_equal(rlock_is_locked(fresh), 0);
    assert_true(rlock_force_unlock(l) >= 0);
    assert_true(rlock_force_unlock(held) >= 0);
    rlock_free(fresh);
    rlock_free(held);
    rlock_free(l);
    rlock_client_free(c);
}

/* After rlock_client_free() every call on a surviving handle is RLOCK_ECLOSED; freeing the handle
 * afterwards is clean (ASan/valgrind would report a leak or a use after free). */
static void test_use_after_client_free(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    rlock *l, *idle;
    tc_orphan_handles(c, "closed-lock", "closed-idle", &l, &idle);

    assert_int_equal(rlock_lock(l, 1000), RLOCK_ECLOSED);
    assert_non_null(strstr(rlock_last_error(), "freed"));
    assert_int_equal(rlock_try_lock(idle, 0, 1000), RLOCK_ECLOSED);
    assert_int_equal(rlock_try_lock(idle, 100, -1), RLOCK_ECLOSED);
    assert_int_equal(rlock_unlock(l), RLOCK_ECLOSED);
    assert_int_equal(rlock_force_unlock(l), RLOCK_ECLOSED);
    assert_int_equal(rlock_is_locked(l), RLOCK_ECLOSED);
    assert_int_equal(rlock_is_held(l), RLOCK_ECLOSED);
    assert_int_equal(rlock_hold_count(l), RLOCK_ECLOSED);
    assert_int_equal(RLOCK_TTL_CODE(rlock_remaining_ttl_ms(l)), RLOCK_ECLOSED);
    assert_int_equal(rlock_token(l), 0);
    /* Opening on the closed client (still a valid object while handles pin it) is refused. */
    rlk_err_clear();
    assert_null(rlock_open(c, RLOCK_REENTRANT, "closed-new"));
    assert_non_null(strstr(rlock_last_error(), rlock_strerror(RLOCK_ECLOSED)));
    rlock_free(l);
    rlock_free(idle);

    /* Nothing renews the orphaned hold any more: the key is still there with a lease of at most
     * watchdog_timeout_ms, so it expires by itself. */
    const char *pttl[] = {"PTTL", "closed-lock", NULL};
    long long left = rh_cmd_int(s, pttl);
    assert_in_range(left, 1, 30000);
}

/* A lock name that holds a plain string: Redis' WRONGTYPE error comes back as RLOCK_EREDIS with
 * Redis' text, and the library stays usable. */
static void test_wrong_type(void **state)
{
    rh_server *s = *state;
    const char *set[] = {"SET", "wt-lock", "x", NULL};
    char *ok = rh_cmd_str(s, set);
    assert_non_null(ok);
    free(ok);
    rlock_client *c = cu_client(s);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "wt-lock");

    rlk_err_clear();
    assert_int_equal(rlock_try_lock(l, 0, 5000), RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "WRONGTYPE"));
    rlk_err_clear();
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_lock(l, -1), RLOCK_EREDIS);
    assert_true(rh_now_ms() - t0 < 500);
    assert_non_null(strstr(rlock_last_error(), "WRONGTYPE"));
    assert_int_equal(rlock_try_lock(l, 200, 5000), RLOCK_EREDIS);
    rlk_err_clear();
    assert_int_equal(rlock_is_held(l), RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "WRONGTYPE"));
    assert_int_equal(rlock_hold_count(l), RLOCK_EREDIS);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_token(l), 0);
    /* The string was not modified by the failed attempts. */
    const char *get[] = {"GET", "wt-lock", NULL};
    char *v = rh_cmd_str(s, get);
    assert_non_null(v);
    assert_string_equal(v, "x");
    free(v);
    /* Force unlock deletes whatever is there; then the lock works. */
    assert_int_equal(rlock_force_unlock(l), 1);
    assert_int_equal(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_close_own(l, c);
}

/* Argument errors never touch Redis and name the bad value. */
static void test_bad_arguments(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    assert_null(rlock_open(NULL, RLOCK_REENTRANT, "x"));
    assert_null(rlock_open(c, RLOCK_REENTRANT, NULL));
    assert_null(rlock_open(c, RLOCK_REENTRANT, ""));
    rlk_err_clear();
    assert_null(rlock_open(c, (rlock_kind)42, "x"));
    assert_non_null(strstr(rlock_last_error(), "42"));
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "args-lock");
    assert_int_equal(rlock_lock(l, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_lock(l, RLOCK_MAX_DURATION_MS + 1), RLOCK_EINVAL);
    assert_int_equal(rlock_try_lock(l, -1, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_lock(NULL, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock(NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_is_locked(NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(NULL);
    tc_close_own(l, c);
    rlock_client_free(NULL);
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_paused_mid_flight),
        TC_SERVER_TEST(test_use_after_client_free), TC_SERVER_TEST(test_wrong_type),
        TC_SERVER_TEST(test_bad_arguments))
