/*
 * RLOCK_SPIN (Redisson's RSpinLock, issue 32 point 2): a user whose ACL refuses every subscribe
 * command still gets working spin locks; a waiter polls with Redisson's exponential back-off, so
 * a hand-off takes at most its 128 ms maximum (plus the attempt) and a long wait costs about one
 * attempt per 128 ms; spin and reentrant threads exclude each other on one name under the
 * independent checker; a Redisson-protocol peer sees a spin hold as an ordinary RLock, and a
 * release that publishes nothing (Redisson's RSpinLock) still reaches a spin waiter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "redis_harness.h"
#include "../compat/redisson_peer.h"
#include "rlock.h"
#include "tc_checker.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* The back-off's maximum pause (Redisson's maxDelay) and what a loaded box may add to one
 * hand-off: the waiter's attempt (a round trip) and its thread being scheduled late. */
#define SPIN_MAX_MS   128
#define SPIN_SLACK_MS 122

static rh_server *g_srv;

/* The user that may do everything but subscribe (to channels, patterns or shard channels). */
static int add_nosub_user(rh_server *s)
{
    const char *acl[] = {"ACL", "SETUSER", "nosub",      "on",          ">nosub-pw",   "~*",
                         "&*",  "+@all",   "-subscribe", "-psubscribe", "-ssubscribe", NULL};
    char *r = rh_cmd_str(s, acl);
    if (r == NULL) {
        return -1;
    }
    free(r);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    int r = tc_fixture_open(&g_srv, NULL, NULL);
    return r != 0 ? r : add_nosub_user(g_srv);
}

static int teardown(void **state)
{
    (void)state;
    return tc_fixture_close(&g_srv, NULL);
}

static rlock_client *nosub_client(void)
{
    rlock_options o;
    tc_options(&o, g_srv);
    return tc_client_as(&o, g_srv, "nosub", "nosub-pw");
}

/* Without subscribe: a reentrant waiter is refused (so the user really cannot subscribe), a spin
 * waiter gets the lock once its holder lets go, and inspect sees an ordinary reentrant lock. */
static void test_no_subscribe(void **state)
{
    (void)state;
    rlock_client *c1 = nosub_client(), *c2 = nosub_client();
    rlock *held = tc_open(c1, RLOCK_SPIN, "spin-acl");
    rlock *re = tc_open(c2, RLOCK_REENTRANT, "spin-acl");
    rlock *sp = tc_open(c2, RLOCK_SPIN, "spin-acl");
    assert_int_equal(rlock_lock(held, -1), RLOCK_OK);
    assert_int_equal(rlock_try_lock(re, 300, 10000), RLOCK_EREDIS);
    rlock_lock_info *in = NULL;
    assert_int_equal(rlock_inspect(c2, "spin-acl", &in), RLOCK_OK);
    assert_int_equal(in->type, RLOCK_TYPE_REENTRANT);
    assert_int_equal(in->n_holders, 1);
    assert_int_equal(strncmp(in->holders[0].owner, rlock_client_id(c1), 36), 0);
    rlock_lock_info_free(in);
    tc_holder w;
    tc_holder_start(&w, sp, 5000, -1, 0);
    rh_sleep_ms(300);
    assert_int_equal(tc_holder_wait(&w, 0), TC_BG_RUNNING);
    assert_int_equal(rlock_unlock(held), RLOCK_OK);
    assert_int_equal(tc_holder_join(&w), RLOCK_OK);
    assert_true(w.token > 0);
    /* Interrupted while polling: the wait ends at once. */
    assert_int_equal(rlock_lock(held, 10000), RLOCK_OK);
    tc_holder_start(&w, sp, RLOCK_WAIT_FOREVER, 10000, 0);
    rh_sleep_ms(200);
    int64_t t0 = rh_now_ms();
    rlock_client_interrupt(c2);
    assert_int_equal(tc_holder_wait(&w, 2000), RLOCK_ETIMEDOUT);
    assert_true(rh_now_ms() - t0 < 1000);
    (void)tc_holder_join(&w);
    assert_int_equal(rlock_unlock(held), RLOCK_OK);
    rlock_free(sp);
    rlock_free(re);
    rlock_free(held);
    rlock_client_free(c2);
    rlock_client_free(c1);
}

/* Five hand-offs to a spin waiter that has polled long enough to pause its maximum: each within
 * the maximum plus slack of the release, and about one attempt per maximum pause meanwhile. */
static void test_handoff_bound(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c1 = tc_client(&o), *c2 = tc_client(&o);
    rlock *h = tc_open(c1, RLOCK_SPIN, "spin-handoff");
    rlock *sp = tc_open(c2, RLOCK_SPIN, "spin-handoff");
    int64_t worst = 0;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rlock_lock(h, 10000), RLOCK_OK);
        tc_holder w;
        tc_holder_start(&w, sp, 10000, 10000, 0);
        rh_sleep_ms(300); /* past the ramp: 1 + 2 + ... + 64 ms */
        long long before = rh_cmdstat_calls(g_srv, "evalsha");
        rh_sleep_ms(1024);
        long long attempts = rh_cmdstat_calls(g_srv, "evalsha") - before;
        assert_int_equal(rlock_unlock(h), RLOCK_OK);
        int64_t released = rh_now_ms();
        assert_int_equal(tc_holder_wait(&w, 5000), RLOCK_OK);
        int64_t late = w.got_at - released;
        assert_int_equal(tc_holder_join(&w), RLOCK_OK);
        print_message("hand-off %d: %lld ms after the release; %lld attempts in 1024 ms\n", i,
                      (long long)late, attempts);
        worst = late > worst ? late : worst;
        /* 1024 / 128 = 8 pauses of the maximum: not a busy loop, and not stalled. */
        assert_in_range(attempts, 4, 10);
        assert_true(late <= SPIN_MAX_MS + SPIN_SLACK_MS);
    }
    print_message("worst hand-off: %lld ms\n", (long long)worst);
    rlock_free(sp);
    rlock_free(h);
    rlock_client_free(c2);
    rlock_client_free(c1);
}

/* One thread of the exclusion test: spin or reentrant, each on its own client. */
typedef struct mix_thread {
    rlock *l;
    tc_mx *mx;
    int errors;
} mix_thread;

static void *mix_run(void *arg)
{
    mix_thread *t = arg;
    for (int i = 0; i < 40; i++) {
        if (rlock_lock(t->l, -1) != RLOCK_OK) {
            t->errors++;
            continue;
        }
        tc_mx_enter(t->mx, 0);
        rh_sleep_ms(1);
        tc_mx_leave(t->mx, 0);
        t->errors += rlock_unlock(t->l) != RLOCK_OK;
    }
    return NULL;
}

/* Two spin and two reentrant threads on one name: never two inside at once. */
static void test_spin_reentrant_exclusion(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_srv);
    tc_mx *mx = tc_mx_new();
    assert_non_null(mx);
    rlock_client *c[4];
    mix_thread t[4];
    for (int i = 0; i < 4; i++) {
        c[i] = tc_client(&o);
        t[i] = (mix_thread){.l = tc_open(c[i], i % 2 ? RLOCK_SPIN : RLOCK_REENTRANT, "spin-mix"),
                            .mx = mx};
    }
    assert_int_equal(tc_threads_run(4, mix_run, t, sizeof(t[0])), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t[i].errors, 0);
        rlock_free(t[i].l);
        rlock_client_free(c[i]);
    }
    assert_int_equal(tc_mx_violations(mx), 0);
    assert_int_equal(tc_mx_entries(mx, 0), 160);
    assert_int_equal(tc_mx_counter(mx, 0), 160);
    tc_mx_free(mx);
}

/* A Redisson RLock (the peer's script) and an rlock spin lock exclude each other; the peer's
 * release is a DEL without a message, as Redisson's RSpinLock releases, and the polling spin
 * waiter still takes the lock within the back-off's bound. */
static void test_redisson_peer(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c = tc_client(&o);
    rlock *sp = tc_open(c, RLOCK_SPIN, "spin-peer");
    redisContext *raw = rh_connect(g_srv);
    assert_non_null(raw);
    assert_int_equal(rlock_lock(sp, 10000), RLOCK_OK);
    redisReply *r = redisCommand(raw, "EVAL %s 1 spin-peer 30000 %s", peer_acquire, PEER_OWNER);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER); /* busy: the holder's PTTL */
    assert_in_range(r->integer, 1, 10000);
    freeReplyObject(r);
    assert_int_equal(rlock_unlock(sp), RLOCK_OK);
    r = redisCommand(raw, "EVAL %s 1 spin-peer 30000 %s", peer_acquire, PEER_OWNER);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_NIL); /* acquired */
    freeReplyObject(r);
    assert_int_equal(rlock_try_lock(sp, 0, 10000), RLOCK_ETIMEDOUT);
    tc_holder w;
    tc_holder_start(&w, sp, 10000, 10000, 0);
    rh_sleep_ms(500);
    r = redisCommand(raw, "DEL spin-peer");
    freeReplyObject(r);
    int64_t released = rh_now_ms();
    assert_int_equal(tc_holder_wait(&w, 5000), RLOCK_OK);
    print_message("after the peer's silent release: %lld ms\n", (long long)(w.got_at - released));
    assert_true(w.got_at - released <= SPIN_MAX_MS + SPIN_SLACK_MS);
    assert_int_equal(tc_holder_join(&w), RLOCK_OK);
    redisFree(raw);
    rlock_free(sp);
    rlock_client_free(c);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_no_subscribe), cmocka_unit_test(test_handoff_bound),
        cmocka_unit_test(test_spin_reentrant_exclusion), cmocka_unit_test(test_redisson_peer))
