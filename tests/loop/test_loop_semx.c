/*
 * The rest of the semaphore and latch on loop clients (include/rlock_async.h) through an adapter
 * (tl_loop.h) against a real redis-server: each single-request call against a threaded client's
 * view of the same data and its bad input, leased permits renewed by the loop watchdog (kept,
 * lost, released), and a lock hold's own on_lost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rlock_async.h"
#include "tc_metric.h"
#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

/* A done record with the value of a call that returns a number. */
typedef struct vd {
    tl_done d; /* first: the tl_*_done callbacks take its address */
    int64_t v;
} vd;

static void sem_value(rlock_semaphore *sem, int rc, int64_t value, void *user_data)
{
    ((vd *)user_data)->v = value;
    tl_sem_done(sem, rc, user_data);
}

/* A leased acquire of several permits: their ids copied. */
typedef struct nd {
    tl_done d; /* first, as in vd */
    size_t n;
    char ids[RLOCK_PERMIT_IDS_MAX][RLOCK_PERMIT_ID_LEN + 1];
    const char *p[RLOCK_PERMIT_IDS_MAX];
} nd;

static void leased_n_done(rlock_semaphore *sem, int rc, const char *const *ids, size_t n,
                          void *user_data)
{
    nd *x = user_data;
    x->n = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(x->ids[i], sizeof(x->ids[i]), "%s", ids[i]);
        x->p[i] = x->ids[i];
    }
    tl_sem_done(sem, rc, user_data);
}

static void acquire_n(tu_loop *l, rlock_semaphore *sem, int64_t n, int64_t lease_ms, nd *x)
{
    *x = (nd){{0}, 0, {{0}}, {0}};
    x->d.inside = 1;
    assert_int_equal(
        rlock_semaphore_acquire_leased_n_async(sem, n, 0, lease_ms, NULL, leased_n_done, x),
        RLOCK_OK);
    x->d.inside = 0;
    tl_wait_done(l, &x->d, RLOCK_OK);
    assert_int_equal(x->n, (size_t)n);
}

static void latch_value(rlock_latch *latch, int rc, int64_t value, void *user_data)
{
    ((vd *)user_data)->v = value;
    tl_latch_done(latch, rc, user_data);
}

/* Runs a call's expression with x->d.inside set around it, asserts it started, waits for done
 * (want) and gives the value. */
#define RUN(l, x, want, call)                                                                      \
    do {                                                                                           \
        *(x) = (vd){{0}, -99};                                                                     \
        (x)->d.inside = 1;                                                                         \
        int rc_ = (call);                                                                          \
        (x)->d.inside = 0;                                                                         \
        assert_int_equal(rc_, RLOCK_OK);                                                           \
        tl_wait_done((l), &(x)->d, (want));                                                        \
    } while (0)

static rlock_client *loop_client(tu_loop *l, rh_server *s, int64_t watchdog_ms,
                                 void (*on_lost)(const char *, void *), void *ud)
{
    rlock_options o;
    tc_options(&o, s);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    o.on_lost = on_lost;
    o.user_data = ud;
    return tl_client(l, &o);
}

static rlock_client *threaded_client(rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tc_client(&o);
}

/* Each semaphore call on the loop reads and writes what the threaded client sees. */
static void test_sem_calls(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0, NULL, NULL), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sx-sem");
    rlock_semaphore *st = rlock_semaphore_open(t, "sx-sem");
    assert_true(sem != NULL && st != NULL);
    vd x;
    RUN(l, &x, RLOCK_OK, rlock_semaphore_release_if_exists_async(sem, 2, sem_value, &x));
    assert_int_equal(x.v, 0); /* never set: nothing written */
    assert_int_equal(rlock_semaphore_available(st), 0);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_try_set_permits_async(sem, 5, sem_value, &x));
    assert_int_equal(x.v, 1);
    assert_int_equal(rlock_semaphore_available(st), 5);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_try_set_permits_async(sem, 7, sem_value, &x));
    assert_int_equal(x.v, 0);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_add_permits_async(sem, 3, tl_sem_done, &x));
    assert_int_equal(rlock_semaphore_available(st), 8);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_add_permits_async(sem, -2, tl_sem_done, &x));
    assert_int_equal(rlock_semaphore_acquire(st, 1, 0), RLOCK_OK);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_available_async(sem, sem_value, &x));
    assert_int_equal(x.v, 5);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_release_if_exists_async(sem, 2, sem_value, &x));
    assert_int_equal(x.v, 1);
    assert_int_equal(rlock_semaphore_available(st), 7);
    /* A leased permit of the threaded client: total, leased, its lease read and updated. */
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(st, 0, 60000, id), RLOCK_OK);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_permits_async(sem, sem_value, &x));
    assert_int_equal(x.v, rlock_semaphore_permits(st));
    assert_int_equal(x.v, 7);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_acquired_async(sem, sem_value, &x));
    assert_int_equal(x.v, 1);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_remaining_lease_ms_async(sem, id, sem_value, &x));
    assert_true(x.v > 50000 && x.v <= 60000);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_update_lease_async(sem, id, 5000, tl_sem_done, &x));
    int64_t left = 0;
    assert_int_equal(rlock_semaphore_remaining_lease_ms(st, id, &left), RLOCK_OK);
    assert_true(left > 3000 && left <= 5000);
    assert_int_equal(rlock_semaphore_release_leased(st, id), RLOCK_OK);
    RUN(l, &x, RLOCK_ENOTOWNER, rlock_semaphore_remaining_lease_ms_async(sem, id, sem_value, &x));
    RUN(l, &x, RLOCK_ENOTOWNER, rlock_semaphore_update_lease_async(sem, id, 5000, tl_sem_done, &x));
    /* Drain takes every available permit; set_permits makes the total. */
    RUN(l, &x, RLOCK_OK, rlock_semaphore_drain_async(sem, sem_value, &x));
    assert_int_equal(x.v, 7);
    assert_int_equal(rlock_semaphore_available(st), 0);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_set_permits_async(sem, 4, tl_sem_done, &x));
    assert_int_equal(rlock_semaphore_permits(st), 4);
    assert_int_equal(rlock_semaphore_available(st), 4);
    /* Several leased permits at once, and released in one call (one no longer held). */
    nd n3;
    acquire_n(l, sem, 3, 60000, &n3);
    assert_int_equal(rlock_semaphore_acquired(st), 3);
    assert_int_equal(rlock_semaphore_available(st), 1);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(st, n3.ids[2], &left), RLOCK_OK);
    assert_true(left > 50000 && left <= 60000);
    assert_int_equal(rlock_semaphore_release_leased(st, n3.ids[1]), RLOCK_OK);
    RUN(l, &x, RLOCK_OK, rlock_semaphore_release_leased_n_async(sem, n3.p, 3, sem_value, &x));
    assert_int_equal(x.v, 2);
    assert_int_equal(rlock_semaphore_acquired(st), 0);
    assert_int_equal(rlock_semaphore_available(st), 4);
    /* The TTL form on a fresh name: the counter's time to live as Redis sees it. */
    rlock_semaphore *sttl = rlock_semaphore_open(c, "sx-sem-ttl");
    RUN(l, &x, RLOCK_OK, rlock_semaphore_try_set_permits_ttl_async(sttl, 2, 30000, sem_value, &x));
    assert_int_equal(x.v, 1);
    const char *pttl[] = {"PTTL", "sx-sem-ttl", NULL};
    long long ttl = rh_cmd_int(s, pttl);
    assert_true(ttl > 20000 && ttl <= 30000);
    rlock_semaphore_free(sttl);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* The latch's count, try-set and delete on the loop against the threaded client's view. */
static void test_latch_calls(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0, NULL, NULL), *t = threaded_client(s);
    rlock_latch *lt = rlock_latch_open(c, "sx-latch"), *tt = rlock_latch_open(t, "sx-latch");
    assert_true(lt != NULL && tt != NULL);
    vd x;
    RUN(l, &x, RLOCK_OK, rlock_latch_count_async(lt, latch_value, &x));
    assert_int_equal(x.v, 0);
    RUN(l, &x, RLOCK_OK, rlock_latch_delete_async(lt, latch_value, &x));
    assert_int_equal(x.v, 0);
    RUN(l, &x, RLOCK_OK, rlock_latch_try_set_count_async(lt, 3, latch_value, &x));
    assert_int_equal(x.v, 1);
    assert_int_equal(rlock_latch_count(tt), 3);
    RUN(l, &x, RLOCK_OK, rlock_latch_try_set_count_async(lt, 9, latch_value, &x));
    assert_int_equal(x.v, 0);
    assert_int_equal(rlock_latch_count_down(tt), RLOCK_OK);
    RUN(l, &x, RLOCK_OK, rlock_latch_count_async(lt, latch_value, &x));
    assert_int_equal(x.v, 2);
    RUN(l, &x, RLOCK_OK, rlock_latch_delete_async(lt, latch_value, &x));
    assert_int_equal(x.v, 1);
    assert_int_equal(rlock_latch_count(tt), 0);
    assert_int_equal(rlock_latch_await(tt, 0), RLOCK_OK);
    rlock_latch_free(lt);
    rlock_latch_free(tt);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Bad input: RLOCK_EINVAL (nothing sent, done never runs); a threaded handle too, and the
 * blocking calls on a loop client; a freed client's pending call ends with RLOCK_ECLOSED. */
static void test_checks(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, s, 0, NULL, NULL), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sx-checks");
    rlock_semaphore *st = rlock_semaphore_open(t, "sx-checks");
    rlock_latch *lt = rlock_latch_open(c, "sx-checks-l"), *tt = rlock_latch_open(t, "sx-checks-l");
    vd x = {{0}, 0};
    const char *id = "0123456789abcdef0123456789abcdef";
    assert_int_equal(rlock_semaphore_try_set_permits_async(NULL, 1, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_async(sem, 1, NULL, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_async(sem, -1, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_async(sem, INT64_C(1) << 31, sem_value, &x),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_async(st, 1, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl_async(sem, 1, 0, sem_value, &x),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_add_permits_async(sem, 0, tl_sem_done, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_add_permits_async(sem, -(INT64_C(1) << 31), tl_sem_done, &x),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_available_async(st, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_drain_async(sem, NULL, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_set_permits_async(sem, -1, tl_sem_done, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_if_exists_async(sem, 0, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_permits_async(NULL, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquired_async(st, sem_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease_async(sem, "xyz", 1000, tl_sem_done, &x),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_update_lease_async(sem, id, 0, tl_sem_done, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_remaining_lease_ms_async(sem, NULL, sem_value, &x),
                     RLOCK_EINVAL);
    assert_int_equal(rlock_latch_try_set_count_async(lt, 0, latch_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_try_set_count_async(tt, 1, latch_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_count_async(NULL, latch_value, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_delete_async(lt, NULL, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased_async(sem, 0, 0, NULL, NULL, &x), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_drain(sem), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_delete(lt), RLOCK_EINVAL);
    tl_run_for(l, 50);
    assert_int_equal(x.d.calls, 0);
    /* Pending at the free: done once, with RLOCK_ECLOSED. */
    vd p[2] = {{{0}, 0}, {{0}, 0}};
    assert_int_equal(rlock_semaphore_drain_async(sem, sem_value, &p[0]), RLOCK_OK);
    assert_int_equal(rlock_latch_count_async(lt, latch_value, &p[1]), RLOCK_OK);
    rlock_client_free(c);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(p[i].d.calls, 1);
        assert_int_equal(p[i].d.rc, RLOCK_ECLOSED);
    }
    assert_int_equal(rlock_semaphore_permits_async(sem, sem_value, &x), RLOCK_ECLOSED);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_latch_free(lt);
    rlock_latch_free(tt);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

typedef struct lost_rec {
    int calls;
    char name[64];
} lost_rec;

static void client_lost(const char *name, void *user_data)
{
    lost_rec *r = user_data;
    r->calls++;
    snprintf(r->name, sizeof(r->name), "%s", name);
}

static int64_t acquired(rlock_semaphore *st)
{
    return rlock_semaphore_acquired(st);
}

/* A leased permit with lease_ms < 0 outlives many watchdog timeouts; released, it is renewed no
 * more (no loss reported after); one whose zset entry is removed is reported lost to on_lost
 * with the semaphore's name, and its release gets RLOCK_ELOST. */
static void test_leased_watchdog(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    lost_rec lost = {0};
    rlock_client *c = loop_client(l, s, 200, client_lost, &lost), *t = threaded_client(s);
    rlock_semaphore *sem = rlock_semaphore_open(c, "sx-wd");
    rlock_semaphore *st = rlock_semaphore_open(t, "sx-wd");
    assert_int_equal(rlock_semaphore_try_set_permits(st, 2), 1);
    tl_done a = {0}, b = {0};
    a.inside = 1;
    assert_int_equal(rlock_semaphore_acquire_leased_async(sem, 0, -1, NULL, tl_leased_done, &a),
                     RLOCK_OK);
    a.inside = 0;
    tl_wait_done(l, &a, RLOCK_OK);
    tl_run_for(l, 700); /* 3.5 leases */
    assert_int_equal(acquired(st), 1);
    int64_t left = 0;
    assert_int_equal(rlock_semaphore_remaining_lease_ms(st, a.id, &left), RLOCK_OK);
    assert_true(left > 0 && left <= 200);
    assert_int_equal(lost.calls, 0);
    tl_done r = {0};
    r.inside = 1;
    assert_int_equal(rlock_semaphore_release_leased_async(sem, a.id, tl_sem_done, &r), RLOCK_OK);
    r.inside = 0;
    tl_wait_done(l, &r, RLOCK_OK);
    assert_int_equal(acquired(st), 0);
    tl_run_for(l, 300); /* a renewal after the release would report a loss */
    assert_int_equal(lost.calls, 0);
    /* Two at once, both renewed, released in one call. */
    nd two;
    acquire_n(l, sem, 2, -1, &two);
    tl_run_for(l, 500);
    assert_int_equal(acquired(st), 2);
    vd rn;
    RUN(l, &rn, RLOCK_OK, rlock_semaphore_release_leased_n_async(sem, two.p, 2, sem_value, &rn));
    assert_int_equal(rn.v, 2);
    assert_int_equal(acquired(st), 0);
    tl_run_for(l, 300);
    assert_int_equal(lost.calls, 0);
    /* Lost: the permit's entry removed behind the holder's back. */
    b.inside = 1;
    assert_int_equal(rlock_semaphore_acquire_leased_async(sem, 0, -1, NULL, tl_leased_done, &b),
                     RLOCK_OK);
    b.inside = 0;
    tl_wait_done(l, &b, RLOCK_OK);
    const char *del[] = {"DEL", "{sx-wd}:timeout", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    tl_run_for(l, 300);
    assert_int_equal(lost.calls, 1);
    assert_string_equal(lost.name, "sx-wd");
    assert_int_equal(tc_metric(c, "rlock_lost_total", "kind=\"semaphore_leased\"", NULL), 1);
    tl_done r2 = {0};
    assert_int_equal(rlock_semaphore_release_leased_async(sem, b.id, tl_sem_done, &r2), RLOCK_OK);
    tl_wait_done(l, &r2, RLOCK_ELOST);
    tl_run_for(l, 250);
    assert_int_equal(lost.calls, 1);
    rlock_semaphore_free(sem);
    rlock_semaphore_free(st);
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

typedef struct hold_rec {
    int calls;
    rlock *lock;
} hold_rec;

static void hold_lost(rlock *lock, void *user_data)
{
    hold_rec *h = user_data;
    h->calls++;
    h->lock = lock;
}

static int lock_with(rlock *lk, rlock_owner *o, void (*fn)(rlock *, void *), void *ud, tl_done *d)
{
    rlock_lock_args args;
    rlock_lock_args_init(&args);
    args.wait_ms = 0;
    args.owner = o;
    args.on_lost = fn;
    args.user_data = ud;
    *d = (tl_done){0};
    d->inside = 1;
    int rc = rlock_lock_async(lk, &args, tl_lock_done, d);
    d->inside = 0;
    return rc;
}

/* A hold's own on_lost: called once with the handle, after the client-wide one (as on a
 * threaded client), when the hold's key is deleted; a re-entry's callback replaces the first
 * one, a re-entry without one keeps it; a hold without one calls the client-wide one only; a
 * released hold's callback is forgotten. */
static void test_hold_on_lost(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    lost_rec lost = {0};
    rlock_client *c = loop_client(l, s, 150, client_lost, &lost);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "sx-hold");
    rlock *fl = tc_open(c, RLOCK_FAIR, "sx-hold-fair");
    rlock_owner *o = tl_owner(c);
    hold_rec first = {0}, second = {0}, fair = {0};
    tl_done d;
    assert_int_equal(lock_with(lk, o, hold_lost, &first, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(lock_with(lk, o, hold_lost, &second, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(lock_with(lk, o, NULL, NULL, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(lock_with(fl, o, hold_lost, &fair, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    tl_run_for(l, 400); /* renewed: nothing lost */
    assert_int_equal(lost.calls + first.calls + second.calls + fair.calls, 0);
    const char *del[] = {"DEL", "sx-hold", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    tl_run_for(l, 250);
    assert_int_equal(second.calls, 1);
    assert_ptr_equal(second.lock, lk);
    assert_int_equal(first.calls, 0);
    assert_int_equal(lost.calls, 1);
    assert_string_equal(lost.name, "sx-hold");
    assert_int_equal(fair.calls, 0);
    tl_unlock_now(l, lk, o, RLOCK_ELOST);
    /* Released, the fair hold's callback is forgotten: a new hold without one, lost, calls the
     * client-wide on_lost only. */
    tl_unlock_now(l, fl, o, RLOCK_OK);
    tl_lock_now(l, fl, o, -1);
    const char *delf[] = {"DEL", "sx-hold-fair", NULL};
    assert_int_equal(rh_cmd_int(s, delf), 1);
    tl_run_for(l, 250);
    assert_int_equal(lost.calls, 2);
    assert_string_equal(lost.name, "sx-hold-fair");
    assert_int_equal(fair.calls, 0);
    assert_int_equal(second.calls, 1);
    tl_unlock_now(l, fl, o, RLOCK_ELOST);
    rlock_owner_free(o);
    rlock_free(lk);
    rlock_free(fl);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_sem_calls),
        cmocka_unit_test(test_latch_calls), cmocka_unit_test(test_checks),
        cmocka_unit_test(test_leased_watchdog), cmocka_unit_test(test_hold_on_lost))
