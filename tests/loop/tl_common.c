/*
 * The loop test programs' shared helpers (tl_common.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "tl_common.h"

int64_t tl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void tl_record(tl_done *d, int rc)
{
    d->calls++;
    d->rc = rc;
    d->ran_inside |= d->inside;
    d->at_ms = tl_now_ms();
    snprintf(d->msg, sizeof(d->msg), "%s", rlock_last_error());
}

void tl_lock_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    tl_record(user_data, rc);
}

void tl_sem_done(rlock_semaphore *sem, int rc, void *user_data)
{
    (void)sem;
    tl_record(user_data, rc);
}

void tl_leased_done(rlock_semaphore *sem, int rc, const char *permit_id, void *user_data)
{
    (void)sem;
    tl_done *d = user_data;
    tl_record(d, rc);
    snprintf(d->id, sizeof(d->id), "%s", permit_id != NULL ? permit_id : "");
}

void tl_latch_done(rlock_latch *latch, int rc, void *user_data)
{
    (void)latch;
    tl_record(user_data, rc);
}

void tl_fire(void *tok)
{
    rlock_cancel_fire(tok);
}

void tl_run_for(tu_loop *l, int64_t ms)
{
    int never = 0;
    (void)tu_run_until(l, &never, 1, ms);
}

void tl_wait_done(tu_loop *l, tl_done *d, int want)
{
    assert_true(tu_run_until(l, &d->calls, 1, 5000));
    assert_int_equal(d->calls, 1);
    assert_int_equal(d->ran_inside, 0);
    assert_int_equal(d->rc, want);
}

rlock_client *tl_client(tu_loop *l, const rlock_options *o)
{
    rlock_client *c = NULL;
    if (tu_client_new(l, o, &c) != RLOCK_OK) {
        fail_msg("loop client on %s: %s", o->url != NULL ? o->url : "?", rlock_last_error());
    }
    return c;
}

rlock_owner *tl_owner(rlock_client *c)
{
    rlock_owner *o = NULL;
    assert_int_equal(rlock_owner_new(c, &o), RLOCK_OK);
    return o;
}

int tl_lock_async(rlock *lk, rlock_owner *o, int64_t wait_ms, int64_t lease_ms,
                  rlock_cancel *cancel, tl_done *d)
{
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = o;
    a.wait_ms = wait_ms;
    a.lease_ms = lease_ms;
    a.cancel = cancel;
    d->inside = 1;
    int rc = rlock_lock_async(lk, &a, tl_lock_done, d);
    d->inside = 0;
    return rc;
}

int tl_unlock_async(rlock *lk, rlock_owner *o, tl_done *d)
{
    d->inside = 1;
    int rc = rlock_unlock_async(lk, o, tl_lock_done, d);
    d->inside = 0;
    return rc;
}

void tl_lock_now(tu_loop *l, rlock *lk, rlock_owner *o, int64_t lease_ms)
{
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, o, 0, lease_ms, NULL, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    assert_int_equal(d.rc, RLOCK_OK);
    assert_int_equal(d.ran_inside, 0);
}

int tl_lock_once(tu_loop *l, rlock *lk, rlock_owner *o, int64_t settle_ms, tl_done *d)
{
    tl_done own;
    d = d != NULL ? d : &own;
    *d = (tl_done){0};
    int rc = tl_lock_async(lk, o, 0, -1, NULL, d);
    if (rc != RLOCK_OK) {
        return rc;
    }
    assert_true(tu_run_until(l, &d->calls, 1, 5000));
    tl_run_for(l, settle_ms);
    assert_int_equal(d->calls, 1);
    return d->rc;
}

void tl_unlock_now(tu_loop *l, rlock *lk, rlock_owner *o, int want_rc)
{
    tl_done d = {0};
    assert_int_equal(tl_unlock_async(lk, o, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    assert_int_equal(d.rc, want_rc);
    assert_int_equal(d.ran_inside, 0);
}
