/*
 * A re-entry never shortens a hold (rlock.h, rlock_lock): rlock_lock(l, -1) then rlock_lock(l, 300)
 * keeps the hold under the watchdog, so another client still cannot take the lock a second later,
 * also after the inner hold was released; an explicit lease on re-entry extends the hold only when
 * it is longer than what is left. Before the fix the reentrant and fair acquire scripts PEXPIREd
 * the key to the re-entry's lease (Redisson's behaviour) and another client took the lock 300 ms
 * later. Every single-key lock type; the read side is challenged by a writer of another client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tc_redis.h"

static rh_server *g_srv;
static rlock_client *g_c;

TC_FIXTURE(g_srv, g_c, NULL)

static long long pttl(const char *name)
{
    const char *argv[] = {"PTTL", name, NULL};
    return rh_cmd_int(g_srv, argv);
}

/* Another client's handle that the hold of kind must keep out (a writer against readers). */
static rlock *rival_open(rlock_client *other, rlock_kind kind, const char *name)
{
    rlock *r = tc_open(other, kind == RLOCK_READ ? RLOCK_WRITE : kind, name);
    return r;
}

/* The rival cannot take the lock now, and the key outlives the short re-entry lease by far. */
static void assert_still_held(rlock *l, rlock *rival, const char *name)
{
    assert_int_equal(rlock_try_lock(rival, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_is_held(l), 1);
    long long t = pttl(name);
    print_message("%s: PTTL %lld ms\n", name, t);
    assert_true(t > 300);
}

static void watchdog_then_short(rlock_kind kind, const char *name)
{
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *other = tc_client(&o);
    rlock *l = rlock_open(g_c, kind, name);
    rlock *rival = rival_open(other, kind, name);
    assert_non_null(l);

    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 300), RLOCK_OK);
    rh_sleep_ms(1000);
    assert_still_held(l, rival, name);
    /* The inner hold's release must not cut the outer hold to the inner lease either. */
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rh_sleep_ms(600);
    assert_still_held(l, rival, name);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_lock_unlock(rival, 0, 10000);

    rlock_free(l);
    tc_close_own(rival, other);
}

/* The read side keeps Redisson's one lease per read hold: a partial release drops the newest
 * hold and its lease, so the lock then lives as long as the longest remaining hold. */
static void explicit_leases(rlock_kind kind, const char *name)
{
    rlock *l = tc_open(g_c, kind, name);
    assert_int_equal(rlock_lock(l, 20000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 300), RLOCK_OK);
    assert_true(pttl(name) > 10000); /* the shorter lease left the hold alone */
    assert_int_equal(rlock_lock(l, 120000), RLOCK_OK);
    assert_true(pttl(name) > 60000); /* the longer one extended it */
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    /* Partial releases keep the longest lease granted (the read side: the remaining holds'). */
    assert_true(pttl(name) > (kind == RLOCK_READ ? 10000 : 60000));
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
}

/* One test per lock type; the prestate is the type, named in the lock names. */
static void test_kind(void **state)
{
    rlock_kind kind = *(const rlock_kind *)*state;
    char wd[32], explicit[32];
    snprintf(wd, sizeof(wd), "rl-%d-wd", (int)kind);
    snprintf(explicit, sizeof(explicit), "rl-%d-explicit", (int)kind);
    watchdog_then_short(kind, wd);
    explicit_leases(kind, explicit);
}

static const rlock_kind k_reentrant = RLOCK_REENTRANT, k_fair = RLOCK_FAIR, k_write = RLOCK_WRITE,
                        k_read = RLOCK_READ;

TC_MAIN(setup, teardown, cmocka_unit_test_prestate(test_kind, (void *)&k_reentrant),
        cmocka_unit_test_prestate(test_kind, (void *)&k_fair),
        cmocka_unit_test_prestate(test_kind, (void *)&k_write),
        cmocka_unit_test_prestate(test_kind, (void *)&k_read))
