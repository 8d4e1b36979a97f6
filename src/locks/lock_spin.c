/*
 * The spin lock's wait (RLOCK_SPIN, Redisson's RSpinLock): attempts again after pauses that grow
 * as Redisson's default exponential back-off (LockOptions.defaults()) does, with no subscription,
 * so that it works where pub/sub is refused. The lock's data, attempts and releases are the
 * reentrant lock's (lock_reentrant.c). Static helpers are named spin_*.
 */
#include <stdlib.h>
#include <time.h>

#include "cancel.h"
#include "error.h"
#include "lock.h"
#include "lock_spin.h"
#include "lock_wait.h"

/* Redisson's ExponentialBackOff defaults: initialDelay 1, multiplier 2, maxDelay 128 (ms). */
#define SPIN_INITIAL_MS 1
#define SPIN_MULTIPLIER 2
#define SPIN_MAX_MS     128
#define SPIN_SLICE_MS   50

/* The next pause: the current one, while the following one becomes current * 2 + a random
 * 0 .. fails-1 ms, capped at the maximum (Redisson's getNextSleepPeriod()). */
int64_t rlk_spin_next(rlk_spin_backoff *b)
{
    if (b->next >= SPIN_MAX_MS) {
        return SPIN_MAX_MS;
    }
    int64_t pause = b->next;
    b->fails++;
    b->next = b->next * SPIN_MULTIPLIER + rand_r(&b->seed) % b->fails;
    if (b->next > SPIN_MAX_MS) {
        b->next = SPIN_MAX_MS;
    }
    return pause;
}

void rlk_spin_backoff_init(rlk_spin_backoff *b, uint64_t tid)
{
    *b = (rlk_spin_backoff){.next = SPIN_INITIAL_MS,
                            .seed = (unsigned)(rlk_now_ms() ^ (int64_t)(tid * 2654435761U))};
}

/* Sleeps until `until` in slices that notice rlock_client_interrupt() and a freed client.
 * Returns RLOCK_OK, or the error that ends the wait. */
static int spin_sleep(rlk_acq *a, int64_t until)
{
    int64_t now;
    while ((now = rlk_now_ms()) < until) {
        if (rlk_pubsub_interrupted(a->client->pubsub)) {
            return rlk_err(RLOCK_ETIMEDOUT, "waiting for lock '%s' was interrupted", a->lock->name);
        }
        int r = rlk_client_check(a->client);
        if (r != RLOCK_OK) {
            return r;
        }
        int64_t step = until - now < SPIN_SLICE_MS ? until - now : SPIN_SLICE_MS;
        if (rlk_cancel_sleep(a->cancel, now + step)) {
            return rlk_cancel_check(a->cancel, "waiting for lock", a->lock->name);
        }
    }
    return RLOCK_OK;
}

int rlk_spin_wait(rlk_acq *a, int64_t deadline)
{
    rlk_spin_backoff b;
    rlk_spin_backoff_init(&b, a->tid);
    int r = 0;
    /* Like Redisson's tryLock(): pause, attempt, and give up once the wait is over; the last
     * pause is cut short so that an attempt is made at the deadline. */
    while (r == 0 && rlk_now_ms() < deadline) {
        int64_t now = rlk_now_ms();
        int64_t until = rlk_add_sat(now, rlk_spin_next(&b));
        r = spin_sleep(a, until < deadline ? until : deadline);
        r = r ? r : a->lock->single->attempt(a);
        r = rlk_wait_recover(a, NULL, NULL, r, deadline);
    }
    return r;
}
