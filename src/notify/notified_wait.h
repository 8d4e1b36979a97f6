/*
 * The notification-driven wait shared by the semaphore and the latch: attempt, and while the
 * attempt says "not yet", sleep on the object's channel until a message (or a hint's deadline)
 * and attempt again. Locks have their own loop in lock_wait.c (armed attempts, queues, hold TTLs).
 */
#ifndef RLK_NOTIFIED_WAIT_H
#define RLK_NOTIFIED_WAIT_H

#include "context.h"

/* One attempt: 1 done, 0 not yet, or a negative error. *hint_ms may be set to a bound on the
 * next sleep (>= 0: something may change by then without a message, e.g. a lease running out);
 * it is -1 on entry. */
typedef int (*rlk_attempt_fn)(void *arg, int64_t *hint_ms);

/* Attempts, then (wait_ms != 0) joins channel with message mode (RLK_MSG_*) and re-attempts
 * after every wake-up until done, an error, or wait_ms (< 0: no limit) has passed. The attempt
 * after the last wake-up is always made, so a permit handed to this waiter is never dropped.
 * Returns 1 done, 0 timed out, or a negative error. */
int rlk_wait_notified(rlock_client *c, const char *channel, size_t len, int mode, int64_t wait_ms,
                      rlk_attempt_fn attempt, void *arg);

/* rlk_wait_notified() that cancel (NULL: never) ends with RLOCK_ECANCELED: at once, before the
 * first attempt, when it fired already; else when it fires during a sleep (within the cancel
 * thread's wake-up, cancel.h). An attempt that succeeded is returned (1) even if the token fired
 * meanwhile, so a grant that races with the cancel is never dropped; the caller gives it back
 * if it must. */
int rlk_wait_notified_cancel(rlock_client *c, const char *channel, size_t len, int mode,
                             int64_t wait_ms, const rlock_cancel *cancel, rlk_attempt_fn attempt,
                             void *arg);

/* For tests: called by a waiter before each sleep after its first with (arg, round), round = 1
 * for the sleep after the first attempt that followed the subscription. NULL = none. Set it
 * before any waiter runs. */
typedef void (*rlk_wait_hook_fn)(void *arg, int round);
void rlk_wait_set_test_hook(rlk_wait_hook_fn fn, void *arg);

#endif
