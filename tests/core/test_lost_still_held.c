/*
 * A hold the watchdog judged lost that still stands on Redis: its renewals could not run for a
 * whole lease (the server paused with CLIENT PAUSE WRITE), while the key outlived the client's
 * reckoning (made persistent here, as a renewal that ran with its reply lost, or a failover,
 * would keep it). The thread's next lock, after an unlock that reported RLOCK_ELOST or without
 * one, must give that hold back and take the lock from free with a larger token, not re-enter it
 * (the old token again, hold count 2, and a hold that each re-entry keeps alive).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"

#define LEASE_MS 1500
#define PAUSE_MS 2500

static atomic_int g_lost;

static void count_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&g_lost, 1);
}

static long long key_cmd(rh_server *s, const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key, NULL};
    return rh_cmd_int(s, argv);
}

/* A watchdog hold of name judged lost by its client while the key stays on Redis; returns the
 * hold's token. */
static uint64_t hold_lost_but_standing(rh_server *s, rlock *l, const char *name)
{
    atomic_store(&g_lost, 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    assert_true(t1 > 0);
    assert_int_equal(key_cmd(s, "PERSIST", name), 1);
    char ms[16];
    snprintf(ms, sizeof(ms), "%d", PAUSE_MS);
    const char *pause[] = {"CLIENT", "PAUSE", ms, "WRITE", NULL};
    char *ok = rh_cmd_str(s, pause);
    assert_non_null(ok);
    free(ok);
    int64_t end = rh_now_ms() + PAUSE_MS + 500;
    while (atomic_load(&g_lost) == 0 && rh_now_ms() < end) {
        rh_sleep_ms(20);
    }
    assert_int_equal(atomic_load(&g_lost), 1);
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    ok = rh_cmd_str(s, unpause);
    free(ok);
    assert_int_equal(key_cmd(s, "EXISTS", name), 1);
    return t1;
}

/* The next lock takes the lock from free: a larger token, one hold; its unlock frees it. */
static void lock_from_free(rh_server *s, rlock *l, const char *name, uint64_t t1)
{
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    print_message("%s: token of the lost hold %llu, of the next %llu, hold count %d\n", name,
                  (unsigned long long)t1, (unsigned long long)rlock_token(l), rlock_hold_count(l));
    assert_true(rlock_token(l) > t1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(key_cmd(s, "EXISTS", name), 0);
}

static void test_lock_after_lost_unlock(void **state)
{
    rh_server *s = *state;
    rlock_client *c = tc_client_tuned(s, LEASE_MS, 300, count_lost, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "ls:unlocked");
    uint64_t t1 = hold_lost_but_standing(s, l, "ls:unlocked");
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(rlock_token(l), 0);
    lock_from_free(s, l, "ls:unlocked", t1);
    tc_close_own(l, c);
}

static void test_lock_without_unlock(void **state)
{
    rh_server *s = *state;
    rlock_client *c = tc_client_tuned(s, LEASE_MS, 300, count_lost, NULL);
    rlock *l = tc_open(c, RLOCK_FAIR, "ls:fair");
    uint64_t t1 = hold_lost_but_standing(s, l, "ls:fair");
    lock_from_free(s, l, "ls:fair", t1);
    tc_close_own(l, c);
}

TC_MAIN(NULL, NULL, TC_SERVER_TEST(test_lock_after_lost_unlock),
        TC_SERVER_TEST(test_lock_without_unlock))
