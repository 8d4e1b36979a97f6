/*
 * RedLock against five real redis-server processes: basic operations and tokens, a majority or
 * minority held elsewhere, every one of the 32 masks of unavailable (SIGSTOPped) servers, the
 * validity check with a server made slow by CLIENT PAUSE, the watchdog losing the majority,
 * NOSCRIPT, bad input, and the restart-delay rule of redis.io (a server that restarts empty
 * must stay out for the longest lease).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multi_util.h"
#include "tc_redis.h"
#include "tc_thread.h"

#define NSRV           5
#define SERVER_TIMEOUT 50

static rh_server *srv[NSRV];
static rlock_client *cli[NSRV];   /* one client per server: "this process" */
static rlock_client *other[NSRV]; /* a second set: "another process" */
static atomic_int lost_calls;

typedef mu_group rl;

static void rl_open(rl *r, rlock_client **c, const size_t *idx, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        r->m[i] = tc_open(c[idx[i]], RLOCK_REENTRANT, name);
    }
    mu_group_make(r, n, rlock_redlock_new);
}

static const size_t first3[3] = {0, 1, 2};
static const size_t all5[5] = {0, 1, 2, 3, 4};

static long long keys_on(const size_t *idx, size_t n, const char *name)
{
    long long k = 0;
    for (size_t i = 0; i < n; i++) {
        k += mu_exists(srv[idx[i]], name);
    }
    return k;
}

static void on_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&lost_calls, 1);
}

static rlock_client *client_with(int i, int64_t watchdog_ms, int64_t server_timeout_ms)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = rh_url(srv[i]);
    tc_tls_options(&o);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    o.watchdog_timeout_ms = watchdog_ms;
    o.redlock_server_timeout_ms = server_timeout_ms;
    o.on_lost = on_lost;
    rlock_client *c = tc_client(&o);
    return c;
}

/* A RedLock on name over the first three servers, on clients of its own (client_with()). */
typedef struct rl_own {
    rlock_client *c[3];
    rl r;
} rl_own;

static void rl_own_open(rl_own *o, int64_t watchdog_ms, int64_t server_timeout_ms, const char *name)
{
    for (int i = 0; i < 3; i++) {
        o->c[i] = client_with(i, watchdog_ms, server_timeout_ms);
    }
    rl_open(&o->r, o->c, first3, 3, name);
}

/* Frees the group, then the clients (a NULL one was freed by the test). */
static void rl_own_close(rl_own *o)
{
    mu_group_close(&o->r);
    for (int i = 0; i < 3; i++) {
        rlock_client_free(o->c[i]);
    }
}

/* Another thread's try_lock of g (wait_ms, lease_ms), given up at once when it succeeds. */
typedef struct tryer {
    rlock *g;
    int64_t wait_ms, lease_ms;
    int rc;
    int64_t took, got_at; /* how long the call took, and when it returned */
} tryer;

static void *tryer_main(void *arg)
{
    tryer *t = arg;
    int64_t t0 = rh_now_ms();
    t->rc = rlock_try_lock(t->g, t->wait_ms, t->lease_ms);
    t->got_at = rh_now_ms();
    t->took = t->got_at - t0;
    if (t->rc == RLOCK_OK) {
        rlock_unlock(t->g);
    }
    return NULL;
}

static void test_basic(void **state)
{
    (void)state;
    rl r;
    rl_open(&r, cli, first3, 3, "rl_basic");
    assert_int_equal(rlock_is_locked(r.g), 0);
    assert_int_equal(rlock_try_lock(r.g, 0, 10000), RLOCK_OK);
    assert_int_equal(keys_on(first3, 3, "rl_basic"), 3);
    assert_int_equal(rlock_is_held(r.g), 1);
    assert_int_equal(rlock_is_locked(r.g), 1);
    uint64_t t1 = rlock_token(r.g);
    assert_true(t1 > 0);
    /* Another thread cannot take it, neither at once nor within 200 ms. */
    tryer t = {.g = r.g, .wait_ms = 200, .lease_ms = 5000};
    pthread_t th;
    pthread_create(&th, NULL, tryer_main, &t);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, RLOCK_ETIMEDOUT);
    assert_true(t.took >= 199 && t.took < 200 + SERVER_TIMEOUT + 300);
    /* Re-entry counts locally. */
    assert_int_equal(rlock_lock(r.g, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(r.g), RLOCK_OK);
    assert_int_equal(rlock_is_held(r.g), 1);
    assert_int_equal(rlock_unlock(r.g), RLOCK_OK);
    assert_int_equal(keys_on(first3, 3, "rl_basic"), 0);
    assert_int_equal(rlock_is_held(r.g), 0);
    assert_int_equal(rlock_unlock(r.g), RLOCK_ENOTOWNER);
    /* Tokens grow with every grant, and the counters were raised to the token. */
    assert_int_equal(rlock_lock(r.g, -1), RLOCK_OK);
    uint64_t t2 = rlock_token(r.g);
    assert_true(t2 > t1);
    for (int i = 0; i < 3; i++) {
        const char *get[] = {"GET", "redisson_lock_token:{rl_basic}", NULL};
        assert_int_equal(rh_cmd_int(srv[i], get), (long long)t2);
    }
    assert_int_equal(rlock_unlock(r.g), RLOCK_OK);
    mu_group_close(&r);
}

/* A waiter is woken by the holder's unlock (pub/sub on the busy server's channel), not by its
 * next random retry (up to 2 x 50 ms away): 10 hand-offs, each well under that. */
static void test_handoff_is_notified(void **state)
{
    (void)state;
    rl h, w;
    rl_open(&h, cli, first3, 3, "rl_handoff");
    rl_open(&w, other, first3, 3, "rl_handoff");
    int64_t worst = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rlock_lock(h.g, 5000), RLOCK_OK);
        tc_holder wt;
        tc_holder_start(&wt, w.g, 3000, 5000, 0);
        mu_sleep_ms(150);
        int64_t released = rh_now_ms();
        assert_int_equal(rlock_unlock(h.g), RLOCK_OK);
        tc_holder_join(&wt);
        assert_int_equal(wt.rc, RLOCK_OK);
        worst = wt.got_at - released > worst ? wt.got_at - released : worst;
    }
    printf("hand-off: worst %lld ms after the unlock\n", (long long)worst);
    assert_true(worst < 60);
    mu_group_close(&h);
    mu_group_close(&w);
}

/* A minority held elsewhere: granted; a majority held elsewhere: refused, nothing left. */
static void test_held_elsewhere(void **state)
{
    (void)state;
    rl r;
    rl_open(&r, cli, first3, 3, "rl_else");
    rlock *o0 = rlock_open(other[0], RLOCK_REENTRANT, "rl_else");
    rlock *o1 = rlock_open(other[1], RLOCK_REENTRANT, "rl_else");
    assert_int_equal(rlock_lock(o0, 20000), RLOCK_OK);
    assert_int_equal(rlock_try_lock(r.g, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(r.g), RLOCK_OK);
    assert_int_equal(mu_hlen(srv[0], "rl_else"), 1); /* the other holder untouched */
    assert_int_equal(rlock_lock(o1, 20000), RLOCK_OK);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(r.g, 300, 10000), RLOCK_ETIMEDOUT);
    int64_t took = rh_now_ms() - t0;
    assert_true(took >= 299 && took < 300 + SERVER_TIMEOUT + 300);
    assert_int_equal(mu_exists(srv[2], "rl_else"), 0);
    assert_int_equal(mu_hlen(srv[0], "rl_else"), 1);
    assert_int_equal(mu_hlen(srv[1], "rl_else"), 1);
    assert_int_equal(rlock_is_locked(r.g), 1);
    assert_int_equal(rlock_unlock(o0), RLOCK_OK);
    assert_int_equal(rlock_unlock(o1), RLOCK_OK);
    rlock_free(o0);
    rlock_free(o1);
    mu_group_close(&r);
}

/* Every mask of SIGSTOPped servers out of 5: success iff at least 3 answer, and the call returns
 * within wait + one per-server timeout (+ slack). */
static void test_quorum_masks(void **state)
{
    (void)state;
    const int64_t wait = 150, slack = 200;
    for (int mask = 0; mask < 32; mask++) {
        char name[32];
        snprintf(name, sizeof(name), "rl_q%d", mask);
        rl r;
        rl_open(&r, cli, all5, 5, name);
        int up = 0;
        for (int i = 0; i < NSRV; i++) {
            if (mask & (1 << i)) {
                assert_int_equal(rh_pause(srv[i]), 0);
            } else {
                up++;
            }
        }
        int64_t t0 = rh_now_ms();
        int rc = rlock_try_lock(r.g, wait, 5000);
        int64_t took = rh_now_ms() - t0;
        int held = rlock_is_held(r.g);
        int unlocked = rc == RLOCK_OK ? rlock_unlock(r.g) : RLOCK_OK;
        for (int i = 0; i < NSRV; i++) { /* resumed before any assertion can stop the test */
            if (mask & (1 << i)) {
                assert_int_equal(rh_resume(srv[i]), 0);
            }
        }
        printf("mask %02x: %d up, rc %d, %lld ms\n", mask, up, rc, (long long)took);
        assert_int_equal(rc == RLOCK_OK, up >= 3);
        assert_true(rc == RLOCK_OK || rc == RLOCK_ETIMEDOUT || rc == RLOCK_ECONN);
        assert_int_equal(held, up >= 3);
        assert_int_equal(unlocked, RLOCK_OK);
        assert_true(took <= wait + SERVER_TIMEOUT + slack);
        assert_true(rc == RLOCK_OK || took >= wait - 1);
        mu_group_close(&r);
    }
}

/* Acquisition slower than the lease (two servers paused by CLIENT PAUSE for 300 ms, inside the
 * 1 s per-server timeout, lease 200 ms): no success, and no key left on any server. */
static void test_validity(void **state)
{
    (void)state;
    rl_own own;
    rl_own_open(&own, 30000, 1000, "rl_valid");
    rl *r = &own.r;
    /* Control: without the delay the same call succeeds. */
    int rc = rlock_try_lock(r->g, 0, 200);
    assert_int_equal(rc, RLOCK_OK);
    rc = rlock_unlock(r->g);
    assert_true(rc == RLOCK_OK || rc == RLOCK_ELOST);
    for (int i = 0; i < 2; i++) {
        const char *pause[] = {"CLIENT", "PAUSE", "300", "ALL", NULL};
        char *ok = rh_cmd_str(srv[i], pause);
        assert_string_equal(ok, "OK");
        free(ok);
    }
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(r->g, 0, 200), RLOCK_ETIMEDOUT);
    assert_true(rh_now_ms() - t0 >= 290);
    assert_int_equal(rlock_is_held(r->g), 0);
    assert_int_equal(rlock_token(r->g), 0);
    assert_int_equal(keys_on(first3, 3, "rl_valid"), 0);
    rl_own_close(&own);
}

/* lease < 0: the watchdogs keep the grants; losing one of three is tolerated, losing two makes
 * the group lost (on_lost once, token 0 at once, unlock RLOCK_ELOST). */
static void test_watchdog_majority(void **state)
{
    (void)state;
    rl_own own;
    rl_own_open(&own, 1200, SERVER_TIMEOUT, "rl_wd");
    rl *r = &own.r;
    atomic_store(&lost_calls, 0);
    assert_int_equal(rlock_lock(r->g, -1), RLOCK_OK);
    uint64_t token = rlock_token(r->g);
    assert_true(token > 0);
    mu_sleep_ms(1500);
    assert_int_equal(rlock_is_held(r->g), 1);
    const char *del[] = {"DEL", "rl_wd", NULL};
    assert_int_equal(rh_cmd_int(srv[0], del), 1); /* one server loses the hold */
    mu_sleep_ms(1200);
    assert_int_equal(atomic_load(&lost_calls), 0);
    assert_int_equal(rlock_is_held(r->g), 1);
    assert_int_equal(rlock_token(r->g), token);   /* a majority still holds it */
    assert_int_equal(rh_cmd_int(srv[1], del), 1); /* a second one: no majority left */
    int64_t t0 = rh_now_ms();
    while (atomic_load(&lost_calls) == 0 && rh_now_ms() - t0 < 3000) {
        mu_sleep_ms(20);
    }
    assert_int_equal(atomic_load(&lost_calls), 1);
    /* rlock.h: a hold the watchdog found lost reports token 0 at once (it used to keep the old
     * token until unlock). */
    assert_int_equal(rlock_token(r->g), 0);
    assert_int_equal(rlock_is_held(r->g), 0);
    assert_int_equal(rlock_lock(r->g, -1), RLOCK_ELOST); /* no re-entry into a lost hold */
    assert_int_equal(rlock_unlock(r->g), RLOCK_ELOST);
    assert_int_equal(keys_on(first3, 3, "rl_wd"), 0);
    mu_sleep_ms(500);
    assert_int_equal(atomic_load(&lost_calls), 1);
    rl_own_close(&own);
}

/* SCRIPT FLUSH on every server: the acquire loads the scripts and carries on. */
static void test_noscript(void **state)
{
    (void)state;
    rl r;
    rl_open(&r, cli, first3, 3, "rl_noscript");
    for (int i = 0; i < 3; i++) {
        const char *flush[] = {"SCRIPT", "FLUSH", NULL};
        char *ok = rh_cmd_str(srv[i], flush);
        free(ok);
    }
    assert_int_equal(rlock_try_lock(r.g, 0, 10000), RLOCK_OK);
    assert_int_equal(keys_on(first3, 3, "rl_noscript"), 3);
    assert_int_equal(rlock_unlock(r.g), RLOCK_OK);
    mu_group_close(&r);
}

static void test_bad_input(void **state)
{
    (void)state;
    rlock *a = rlock_open(cli[0], RLOCK_REENTRANT, "rl_bad_a");
    rlock *b = rlock_open(cli[0], RLOCK_REENTRANT, "rl_bad_b");
    rlock *same[2] = {a, b};
    assert_null(rlock_redlock_new(same, 2));
    assert_int_equal(rlock_redlock_new(NULL, 0) == NULL, 1);
    rlock *f = rlock_open(cli[1], RLOCK_FAIR, "rl_bad_f");
    if (f != NULL) {
        rlock *mixed[2] = {a, f};
        assert_null(rlock_redlock_new(mixed, 2));
        assert_non_null(strstr(rlock_last_error(), "reentrant"));
        rlock_free(f);
    }
    rlock *many[17];
    for (int i = 0; i < 17; i++) {
        char name[16];
        snprintf(name, sizeof(name), "rl_many%d", i);
        many[i] = rlock_open(cli[i % NSRV], RLOCK_REENTRANT, name);
    }
    assert_null(rlock_redlock_new(many, 17));
    for (int i = 0; i < 17; i++) {
        rlock_free(many[i]);
    }
    rlock *g = rlock_redlock_new(&a, 1);
    assert_non_null(g);
    assert_int_equal(rlock_force_unlock(g), RLOCK_ENOTSUP);
    assert_int_equal(rlock_hold_count(g), RLOCK_ENOTSUP);
    assert_int_equal(RLOCK_TTL_CODE(rlock_remaining_ttl_ms(g)), RLOCK_ENOTSUP);
    assert_int_equal(rlock_token(g), 0);
    assert_int_equal(rlock_unlock(g), RLOCK_ENOTOWNER);
    rlock_free(g);
    rlock_free(a);
    rlock_free(b);
}

/* A member's client freed under the group: every group call reports RLOCK_ECLOSED. */
static void test_client_closed(void **state)
{
    (void)state;
    rl_own own;
    rl_own_open(&own, 1500, SERVER_TIMEOUT, "rl_closed");
    rl *r = &own.r;
    assert_int_equal(rlock_lock(r->g, -1), RLOCK_OK);
    rlock_client_free(own.c[1]);
    own.c[1] = NULL;
    assert_int_equal(rlock_is_held(r->g), RLOCK_ECLOSED);
    assert_int_equal(rlock_is_locked(r->g), RLOCK_ECLOSED);
    assert_int_equal(rlock_unlock(r->g), RLOCK_ECLOSED);
    assert_int_equal(rlock_try_lock(r->g, 0, 1000), RLOCK_ECLOSED);
    rl_own_close(&own); /* stops the renewals; the keys expire with their lease */
}

/* H holds a bare majority {0, 1} (server 2 was down during its acquire). Server 1 then dies
 * and comes back empty after restart_delay_ms while G ("another process") keeps trying.
 * Returns how long after the end of H's validity G got the lock (negative: two holders). */
static int64_t restart_scenario(const char *name, int64_t restart_delay_ms)
{
    const int64_t lease = 1500;
    rl h, g;
    rl_open(&h, cli, first3, 3, name);
    rl_open(&g, other, first3, 3, name);
    /* Killed rather than paused: a paused server would run H's queued acquire when it wakes
     * up and so hold H's lock as well. */
    assert_int_equal(rh_stop(srv[2]), 0);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(h.g, 0, lease), RLOCK_OK);
    int64_t h_valid_until = t0 + lease - (lease / 100 + 2);
    assert_int_equal(rh_restart(srv[2]), 0);
    assert_int_equal(rh_stop(srv[1]), 0);
    tryer l = {.g = g.g, .wait_ms = 6000, .lease_ms = lease, .rc = -1};
    pthread_t th;
    /* With the delay, G already tries while server 1 is down (it must not get in before H's
     * validity ends). Without it, G starts once server 1 is back: started earlier, the pool's
     * reconnect back-off towards the dead server could hide the hazard by luck. */
    if (restart_delay_ms > 0) {
        pthread_create(&th, NULL, tryer_main, &l);
    }
    mu_sleep_ms(restart_delay_ms);
    assert_int_equal(rh_restart(srv[1]), 0);
    if (restart_delay_ms == 0) {
        pthread_create(&th, NULL, tryer_main, &l);
    }
    pthread_join(th, NULL);
    assert_int_equal(l.rc, RLOCK_OK);
    (void)rlock_unlock(h.g); /* ELOST or ENOTOWNER: its grants are gone */
    mu_group_close(&h);
    mu_group_close(&g);
    return l.got_at - h_valid_until;
}

/* The restart-delay rule of redis.io: a server restarted without persistence must stay away
 * for at least the longest lease. Without the delay a second holder gets in during the first
 * one's validity; with it, only after. */
static void test_restart_rule(void **state)
{
    (void)state;
    int64_t unsafe = restart_scenario("rl_restart_now", 0);
    int64_t safe = restart_scenario("rl_restart_late", 1500);
    printf("restart at once: second holder %lld ms after the first one's validity ended; "
           "restart after the max lease: %lld ms\n",
           (long long)unsafe, (long long)safe);
    assert_true(unsafe < 0);
    assert_true(safe >= 0);
}

static int setup(void **state)
{
    (void)state;
    if (mu_start(srv, NSRV) != 0 || mu_clients(cli, srv, NSRV, 0, SERVER_TIMEOUT) != 0) {
        return -1;
    }
    return mu_clients(other, srv, NSRV, 0, SERVER_TIMEOUT);
}

static int teardown(void **state)
{
    (void)state;
    mu_close(other, NULL, NSRV);
    mu_close(cli, srv, NSRV);
    return 0;
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_basic), cmocka_unit_test(test_held_elsewhere),
        cmocka_unit_test(test_quorum_masks), cmocka_unit_test(test_validity),
        cmocka_unit_test(test_watchdog_majority), cmocka_unit_test(test_noscript),
        cmocka_unit_test(test_bad_input), cmocka_unit_test(test_client_closed),
        cmocka_unit_test(test_handoff_is_notified), cmocka_unit_test(test_restart_rule))
