/*
 * Helpers the loop test programs share (compiled into each, tests/cmake/loop.cmake): a done
 * callback's record for every operation type, the loop run for a while or until a done, a loop
 * client through the program's adapter (tl_loop.h), and lock calls that note whether done ran
 * inside them.
 */
#ifndef RLOCK_TESTS_TL_COMMON_H
#define RLOCK_TESTS_TL_COMMON_H

#include <stdint.h>

#include "rlock.h"
#include "tl_loop.h"

/* One done callback's record: how often it ran, with what, and whether it ran inside the
 * *_async call that started it (which it must never do). */
typedef struct tl_done {
    int calls;
    int rc;
    int inside; /* set around each *_async call */
    int ran_inside;
    int64_t at_ms;
    char id[RLOCK_PERMIT_ID_LEN + 1]; /* a leased permit's id ("" without one) */
    char msg[256];                    /* rlock_last_error() in done */
} tl_done;

/* The monotonic clock in ms. */
int64_t tl_now_ms(void);
/* The done callbacks of each type, user_data a tl_done. */
void tl_lock_done(rlock *lock, int rc, void *user_data);
void tl_sem_done(rlock_semaphore *sem, int rc, void *user_data);
void tl_leased_done(rlock_semaphore *sem, int rc, const char *permit_id, void *user_data);
void tl_latch_done(rlock_latch *latch, int rc, void *user_data);
/* rlock_cancel_fire(tok), as a tu_after() callback. */
void tl_fire(void *tok);

/* Runs the loop for ms. */
void tl_run_for(tu_loop *l, int64_t ms);
/* Runs the loop until d's done ran, and checks it ran once, on the loop, with want. */
void tl_wait_done(tu_loop *l, tl_done *d, int want);
/* A loop client on the program's adapter with options o; the test fails without one. */
rlock_client *tl_client(tu_loop *l, const rlock_options *o);
/* A new owner of c; the test fails without one. */
rlock_owner *tl_owner(rlock_client *c);

/* rlock_lock_async() with these arguments and tl_lock_done, d->inside set around the call. */
int tl_lock_async(rlock *lk, rlock_owner *o, int64_t wait_ms, int64_t lease_ms,
                  rlock_cancel *cancel, tl_done *d);
/* rlock_unlock_async() with tl_lock_done, d->inside set around the call. */
int tl_unlock_async(rlock *lk, rlock_owner *o, tl_done *d);
/* Locks without waiting and runs the loop until done, asserting RLOCK_OK, not inside the call. */
void tl_lock_now(tu_loop *l, rlock *lk, rlock_owner *o, int64_t lease_ms);
/* Locks without waiting (watchdog lease), runs the loop until done, then settle_ms more, and
 * asserts done ran once: its code, or the returned one when the call did not start. d (NULL:
 * one of its own) keeps the record. */
int tl_lock_once(tu_loop *l, rlock *lk, rlock_owner *o, int64_t settle_ms, tl_done *d);
/* Unlocks and runs the loop until done, asserting want_rc, not inside the call. */
void tl_unlock_now(tu_loop *l, rlock *lk, rlock_owner *o, int want_rc);

#endif
