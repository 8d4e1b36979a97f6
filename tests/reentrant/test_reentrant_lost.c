/*
 * Lost leases. A hold kept by the watchdog (watchdog_timeout_ms = 1500) whose renewals cannot
 * keep it - because (a) its key was deleted behind its back, or (b) the server was paused with
 * SIGSTOP for longer than the lease - is reported exactly once through on_lost, rlock_is_held()
 * says 0, rlock_token() 0, rlock_unlock() returns RLOCK_ELOST (and then RLOCK_ENOTOWNER: the
 * record is gone), and the next holder's fencing token is larger than the lost one's.
 * A hold with an explicit lease has no watchdog: it expires silently (no on_lost) and its late
 * unlock is RLOCK_ELOST too.
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

#include "re_common.h"
#include "tc_thread.h"

#define WD_MS 1500

static rh_server *g_srv;
static atomic_int g_lost_calls;   /* on_lost calls for the lock under test */
static atomic_int g_lost_other;   /* on_lost calls naming any other lock (must stay 0) */
static const char *g_expect_name; /* set before the client exists; read-only afterwards */

static void on_lost(const char *name, void *user)
{
    if (user == &g_lost_calls && name != NULL && strcmp(name, g_expect_name) == 0) {
        atomic_fetch_add(&g_lost_calls, 1);
    } else {
        atomic_fetch_add(&g_lost_other, 1);
    }
}

TC_SERVER_FIXTURE(g_srv)

/* Polls the callback counter until it reaches want or ms passed; returns the time it took. */
static int64_t wait_lost(int want, int64_t ms)
{
    int64_t t0 = rh_now_ms();
    while (atomic_load(&g_lost_calls) < want && rh_now_ms() - t0 < ms) {
        rh_sleep_ms(5);
    }
    return rh_now_ms() - t0;
}

/* The checks after a loss, shared by both scenarios. */
static void assert_lost_state(rlock *l, uint64_t lost_token)
{
    assert_int_equal(rlock_is_held(l), 0);
    assert_int_equal(rlock_token(l), 0);
    /* Another thread takes the lock (waiting up to 5 s), reads its token and releases it. */
    tc_holder h;
    tc_holder_run(&h, l, 5000, -1, 0);
    assert_int_equal(h.rc, RLOCK_OK);
    print_message("lost token %llu, next holder's token %llu\n", (unsigned long long)lost_token,
                  (unsigned long long)h.token);
    assert_true(h.token > lost_token);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_true(strlen(rlock_last_error()) > 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* The thread can take the lock again afresh, with a newer token still. */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_true(rlock_token(l) > h.token);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(atomic_load(&g_lost_calls), 1);
    assert_int_equal(atomic_load(&g_lost_other), 0);
}

/* A hold of the test: its client (the test's watchdog timeout, a command timeout, on_lost
 * counting into g_lost_calls), its handle and the hold's fencing token. */
typedef struct lost_hold {
    rlock_client *c;
    rlock *l;
    uint64_t token;
} lost_hold;

/* Opens name, the lock the test expects on_lost to name, on a new client with the given command
 * timeout (0: the default), with g_lost_calls reset, and takes it with lease_ms (-1: the
 * watchdog's); the token must be one (> 0). */
static lost_hold lost_take(const char *name, int64_t command_timeout_ms, int64_t lease_ms)
{
    lost_hold h;
    g_expect_name = name;
    atomic_store(&g_lost_calls, 0);
    h.c = tc_client_tuned(g_srv, WD_MS, command_timeout_ms, on_lost, &g_lost_calls);
    h.l = tc_open(h.c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(h.l, lease_ms), RLOCK_OK);
    h.token = rlock_token(h.l);
    assert_true(h.token > 0);
    return h;
}

/* The end of a lost watchdog hold whose on_lost fired took ms after the loss, within bound_ms:
 * no second call while the record lingers, the state of assert_lost_state(), the client freed. */
static void lost_finish(lost_hold *h, int64_t took, int64_t bound_ms)
{
    assert_true(took <= bound_ms);
    rh_sleep_ms(WD_MS);
    assert_lost_state(h->l, h->token);
    tc_close_own(h->l, h->c);
}

/* (a) The key is deleted behind the holder's back (here held twice: reentrant). */
static void test_lost_by_del(void **state)
{
    (void)state;
    lost_hold h = lost_take("re:lost:del", 0, -1);
    assert_int_equal(rlock_lock(h.l, -1), RLOCK_OK);

    const char *del[] = {"DEL", g_expect_name, NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    /* The next renewal (within one 500 ms period) finds the owner gone. */
    int64_t took = wait_lost(1, 3000);
    print_message("DEL: on_lost fired %lld ms after the key was deleted\n", (long long)took);
    assert_int_equal(atomic_load(&g_lost_calls), 1);
    lost_finish(&h, took, WD_MS / 3 + 200);
}

/* (b) The server is paused past the lease: renewals time out, the watchdog judges the lease
 * over on the monotonic clock (while Redis is still stopped) and reports it once. */
static void test_lost_by_pause(void **state)
{
    (void)state;
    lost_hold h = lost_take("re:lost:pause", 300, -1);
    rh_sleep_ms(WD_MS / 3 + 100); /* at least one successful renewal first */

    assert_int_equal(rh_pause(g_srv), 0);
    int64_t took = wait_lost(1, 2 * WD_MS + 1000);
    int fired_while_paused = atomic_load(&g_lost_calls);
    /* is_held answers from the lost mark without asking the stopped server. */
    int held_while_paused = rlock_is_held(h.l);
    rh_sleep_ms(500);
    assert_int_equal(rh_resume(g_srv), 0);
    print_message("SIGSTOP: on_lost fired %lld ms into the pause\n", (long long)took);
    assert_int_equal(fired_while_paused, 1);
    assert_int_equal(held_while_paused, 0);
    lost_finish(&h, took, WD_MS + 500);
}

/* A hold with an explicit lease is not the watchdog's: it expires without on_lost, and its late
 * unlock reports RLOCK_ELOST and leaves the next holder's data alone. */
static void test_explicit_lease_expires_silently(void **state)
{
    (void)state;
    lost_hold lh = lost_take("re:lost:lease", 0, 300);
    rlock *l = lh.l;
    rh_sleep_ms(WD_MS);
    assert_int_equal(atomic_load(&g_lost_calls), 0);
    assert_int_equal(rlock_is_held(l), 0);
    /* Another thread takes the lock (waiting up to 5 s), reads its token and releases it. */
    tc_holder h;
    tc_holder_run(&h, l, 5000, -1, 0);
    assert_int_equal(h.rc, RLOCK_OK);
    assert_true(h.token > lh.token);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_true(strlen(rlock_last_error()) > 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(atomic_load(&g_lost_calls), 0);
    assert_int_equal(atomic_load(&g_lost_other), 0);
    tc_close_own(l, lh.c);
}

/* A call that asks Redis and finds the hold gone updates the hold record: after rlock_is_held()
 * answered 0, rlock_token() is 0 too (rlock.h), not the token of the hold that is gone. */
static void test_is_held_clears_token(void **state)
{
    (void)state;
    lost_hold h = lost_take("re:lost:isheld", 0, 60000);
    rlock *l = h.l;
    uint64_t token = h.token;
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    const char *del[] = {"DEL", g_expect_name, NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    assert_int_equal(rlock_token(l), token); /* nobody asked Redis yet */
    assert_int_equal(rlock_is_held(l), 0);
    assert_int_equal(rlock_token(l), 0);
    assert_int_equal(rlock_is_held(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* A new hold starts afresh, with a newer token. */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_true(rlock_token(l) > token);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), 0);
    assert_int_equal(atomic_load(&g_lost_calls), 0);
    assert_int_equal(atomic_load(&g_lost_other), 0);
    tc_close_own(l, h.c);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_lost_by_del), cmocka_unit_test(test_lost_by_pause),
        cmocka_unit_test(test_explicit_lease_expires_silently),
        cmocka_unit_test(test_is_held_clears_token))
