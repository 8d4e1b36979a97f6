/*
 * A loop client (through the adapter of tl_loop.h, libuv in CI) and the released Redisson (the
 * Java peer of compat/redisson_java.h) on one reentrant lock: their sections exclude each other
 * under the peer's file-backed checker, a loop waiter behind a Redisson holder is woken by
 * Redisson's unlock ("0" on redisson_lock__channel:{name}), and a Redisson waiter by the loop's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../compat/redisson_java.h"
#include "tl_loop.h"
#include "tc_redis.h"

/* The Java side's lockWatchdogTimeout (short, as in test_redisson_java_lock). */
#define JAVA_WATCHDOG_MS 1500
/* A wake-up later than this did not come from the release's message: the holder's lease is
 * 60 s and the waiter's limit 10 s. */
#define MESSAGE_MS 1000.0

static rh_server *g_srv;
static rj_peer *g_peer;

static int group_setup(void **state)
{
    rj_require(state);
    g_srv = tc_start();
    g_peer = rj_start(g_srv, JAVA_WATCHDOG_MS);
    print_message("Redisson %s, client id %s\n", rj_version(g_peer), rj_id(g_peer));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rj_stop(g_peer);
    rh_free(g_srv);
    return 0;
}

static rlock_client *loop_client(tu_loop *l)
{
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c = NULL;
    if (tu_client_new(l, &o, &c) != RLOCK_OK) {
        fail_msg("the adapter's client: %s", rlock_last_error());
    }
    return c;
}

static void run_for(tu_loop *l, int64_t ms)
{
    int never = 0;
    (void)tu_run_until(l, &never, 1, ms);
}

/* ---- both sides in turns under the checker ------------------------------------------------ */

#define MX_OWNERS    4   /* loop owners on one client */
#define MX_JAVA      2   /* Redisson threads */
#define MX_JAVA_ITER 100 /* sections per Redisson thread */
#define MX_LOOP_MIN  50  /* sections per loop owner at least */

typedef struct mx_run mx_run;

typedef struct mx_owner {
    mx_run *run;
    rlock_owner *owner;
    int sections, pending;
} mx_owner;

struct mx_run {
    tu_loop *l;
    rlock *lock;
    rj_checker *ck;
    mx_owner owners[MX_OWNERS];
    int ids[MX_JAVA];
    char *replies[MX_JAVA];
    int java_left, idle, errors, bad_dones;
};

static void mx_next(mx_owner *o);

static void mx_unlocked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    mx_owner *o = user_data;
    o->run->bad_dones += o->pending != 2;
    o->pending = 0;
    o->run->errors += rc != RLOCK_OK;
    mx_next(o);
}

/* The section's end: the checker first, then the release. */
static void mx_release(void *arg)
{
    mx_owner *o = arg;
    rj_ck_leave(o->run->ck, 0);
    o->pending = 2;
    if (rlock_unlock_async(o->run->lock, o->owner, mx_unlocked, o) != RLOCK_OK) {
        o->pending = 0;
        o->run->errors++;
        o->run->idle++;
    }
}

static void mx_locked(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    mx_owner *o = user_data;
    o->run->bad_dones += o->pending != 1;
    o->pending = 0;
    if (rc != RLOCK_OK) {
        o->run->errors++;
        mx_next(o);
        return;
    }
    rj_ck_enter(o->run->ck, 0);
    o->sections++;
    tu_after(o->run->l, o->sections % 2, mx_release, o); /* across a loop turn, 0 or 1 ms */
}

/* Another section, until the owner made its share and every Redisson thread finished. */
static void mx_next(mx_owner *o)
{
    mx_run *r = o->run;
    if (o->sections >= MX_LOOP_MIN && r->java_left == 0) {
        r->idle++;
        return;
    }
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = o->owner;
    a.wait_ms = 30000;
    o->pending = 1;
    if (rlock_lock_async(r->lock, &a, mx_locked, o) != RLOCK_OK) {
        o->pending = 0;
        r->errors++;
        r->idle++;
    }
}

/* Takes the Redisson threads' replies that came, without waiting; again in 10 ms until all. */
static void mx_poll_java(void *arg)
{
    mx_run *r = arg;
    for (int i = 0; i < MX_JAVA; i++) {
        if (r->replies[i] == NULL && (r->replies[i] = rj_wait(g_peer, r->ids[i], 0)) != NULL) {
            r->java_left--;
        }
    }
    if (r->java_left > 0) {
        tu_after(r->l, 10, mx_poll_java, r);
    }
}

/* 4 loop owners and 2 Redisson threads take one name in turns: no section overlaps another in
 * the checker both sides write, every section counted, every done once. */
static void test_mixed_sections(void **state)
{
    (void)state;
    char path[64];
    mx_run r = {.l = tu_loop_new(), .ck = rj_checker_new(path), .java_left = MX_JAVA};
    assert_non_null(r.l);
    assert_non_null(r.ck);
    rlock_client *c = loop_client(r.l);
    r.lock = tc_open(c, RLOCK_REENTRANT, "rjl:mixed");
    for (int i = 0; i < MX_JAVA; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "m%d", i);
        r.ids[i] = rj_send(g_peer, worker, "stress lock rjl:mixed %d 200 %s 0", MX_JAVA_ITER, path);
    }
    for (int i = 0; i < MX_OWNERS; i++) {
        r.owners[i] = (mx_owner){.run = &r};
        assert_int_equal(rlock_owner_new(c, &r.owners[i].owner), RLOCK_OK);
        mx_next(&r.owners[i]);
    }
    tu_after(r.l, 10, mx_poll_java, &r);
    int64_t t0 = rh_now_ms();
    assert_true(tu_run_until(r.l, &r.idle, MX_OWNERS, 60000));
    rj_ck_slot *s = &r.ck->slot[0];
    int loop_sections = 0;
    for (int i = 0; i < MX_OWNERS; i++) {
        loop_sections += r.owners[i].sections;
        assert_int_equal(r.owners[i].pending, 0);
        rlock_owner_free(r.owners[i].owner);
    }
    print_message("loop x%d: %d sections, Redisson x%d: %d, in %lld ms: %lld violations\n",
                  MX_OWNERS, loop_sections, MX_JAVA, MX_JAVA * MX_JAVA_ITER,
                  (long long)(rh_now_ms() - t0), (long long)atomic_load(&s->violations));
    for (int i = 0; i < MX_JAVA; i++) {
        assert_non_null(r.replies[i]);
        assert_string_equal(r.replies[i], "ok 100");
        free(r.replies[i]);
    }
    assert_int_equal(r.errors, 0);
    assert_int_equal(r.bad_dones, 0);
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(atomic_load(&s->entries), loop_sections + MX_JAVA * MX_JAVA_ITER);
    rj_checker_free(r.ck, path);
    rlock_free(r.lock);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(r.l), 0);
}

/* ---- wake-ups both ways ------------------------------------------------------------------- */

typedef struct wk_done {
    int calls, rc;
    double at;
} wk_done;

static void wk_on_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    wk_done *d = user_data;
    d->calls++;
    d->rc = rc;
    d->at = rj_now_ms();
}

/* Redisson holds name; a loop waiter (subscribed, asleep) gets it after Redisson's unlock: the
 * ms from just before that unlock to the loop's done. */
static double java_release_wakes_loop(tu_loop *l, rlock *lk, rlock_owner *ow, const char *name)
{
    rj_expect(g_peer, "w1", "ok", "lock lock %s 60000", name);
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = ow;
    a.wait_ms = 10000;
    wk_done d = {0};
    assert_int_equal(rlock_lock_async(lk, &a, wk_on_done, &d), RLOCK_OK);
    run_for(l, 200); /* its attempt, SUBSCRIBE and the attempt after it: asleep now */
    assert_int_equal(d.calls, 0);
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    assert_int_equal(tc_listeners(g_srv, channel), 1); /* its pattern, not counted by NUMSUB */
    char *rep = rj_call(g_peer, "w1", "unlock lock %s", name);
    double released = rj_reply_ms(rep);
    free(rep);
    assert_true(tu_run_until(l, &d.calls, 1, 15000));
    assert_int_equal(d.rc, RLOCK_OK);
    return d.at - released;
}

/* The loop client holds name; a Redisson waiter gets it after the loop's unlock. */
static double loop_release_wakes_java(tu_loop *l, rlock *lk, rlock_owner *ow, const char *name)
{
    int id = rj_send(g_peer, "w2", "try lock %s 10000 -1", name);
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    assert_true(tc_wait_numsub(g_srv, channel, 1, 5000));
    rh_sleep_ms(100); /* its attempt after the subscription is over: it sleeps */
    wk_done d = {0};
    double released = rj_now_ms();
    assert_int_equal(rlock_unlock_async(lk, ow, wk_on_done, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    assert_int_equal(d.rc, RLOCK_OK);
    char *rep = rj_wait(g_peer, id, 15000);
    assert_non_null(rep);
    assert_int_equal(rep[0], '1');
    double got = rj_reply_ms(rep);
    free(rep);
    rj_expect(g_peer, "w2", "ok", "unlock lock %s", name);
    return got - released;
}

/* Three rounds: Redisson's unlock wakes the loop waiter, which then holds (Redis shows its
 * owner field); the loop's unlock wakes a Redisson waiter. Each within MESSAGE_MS. */
static void test_wakeups_both_ways(void **state)
{
    (void)state;
    static const char *const name = "rjl:wake";
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, name);
    rlock_owner *ow = NULL;
    assert_int_equal(rlock_owner_new(c, &ow), RLOCK_OK);
    redisContext *ctx = rh_connect(g_srv);
    assert_non_null(ctx);
    for (int round = 0; round < 3; round++) {
        double to_loop = java_release_wakes_loop(l, lk, ow, name);
        const char *hget[] = {"HGET", name, rlock_owner_id(ow)};
        assert_int_equal(tc_int(ctx, 3, hget), 1);
        double to_java = loop_release_wakes_java(l, lk, ow, name);
        print_message("round %d: Redisson -> loop %.2f ms, loop -> Redisson %.2f ms\n", round,
                      to_loop, to_java);
        assert_true(to_loop < MESSAGE_MS);
        assert_true(to_java < MESSAGE_MS);
    }
    const char *exists[] = {"EXISTS", name};
    assert_int_equal(tc_int(ctx, 2, exists), 0);
    redisFree(ctx);
    rlock_owner_free(ow);
    rlock_free(lk);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_sections),
        cmocka_unit_test(test_wakeups_both_ways),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
