/*
 * A waiting operation of a loop client (a semaphore acquire, a latch await): it attempts, joins
 * its channel, sleeps until a message, its timer or its token, and attempts again, by the rules
 * of rlock_async.h. The module that runs it sends each attempt and decodes its reply; this file
 * keeps the states, the channel and the timer.
 */
#ifndef RLK_LOOP_WAIT_H
#define RLK_LOOP_WAIT_H

#include "loop_client.h"

typedef struct rlk_loop_wait rlk_loop_wait;

struct rlk_loop_wait {
    rlk_loop_op base;
    const char *channel; /* borrowed from the handle */
    size_t channel_len;
    int64_t deadline; /* monotonic ms, INT64_MAX: none */
    int64_t hint_ms;  /* the last busy attempt's hint (>= 0: attempt again after it) */
    void *timer;
    int inflight; /* an attempt is on its way: only its reply may complete the operation */
    int resend;   /* rlk_loop_wait_resend(): the timer sends the attempt, still in flight */
    int woken;    /* a message or confirmation came while an attempt was on its way */
    /* Sends one attempt whose reply calls rlk_loop_wait_result(): RLOCK_OK or an error. */
    int (*attempt)(rlk_loop_wait *w);
    /* Ends the operation: calls rlk_loop_wait_end(), frees its record, then runs done. */
    void (*complete)(rlk_loop_wait *w, int rc);
};

/* Starts w (channel, attempt and complete set by the caller) with wait_ms (>= 0; above
 * RLOCK_MAX_DURATION_MS: no limit) and cancel (NULL: none): on the client's list, first attempt
 * sent. RLOCK_OK, or an error with w on no list and no timer (the caller frees it). */
int rlk_loop_wait_start(rlk_loop_client *lc, rlk_loop_wait *w, const rlock_cancel *cancel,
                        int64_t wait_ms);
/* An attempt's outcome: r 1 done (complete gets RLOCK_OK), 0 busy (hint_ms >= 0: attempt again
 * after it at the latest; < 0: at the next message or after subscription_timeout_ms), or a
 * negative error. */
void rlk_loop_wait_result(rlk_loop_wait *w, int r, int64_t hint_ms);
/* Calls attempt again at the loop's next turn, the operation staying in flight meanwhile (no
 * token, deadline or message ends it): for a follow-up request of the module's that cannot be
 * sent from inside the failed request's reply, whose connection is still being torn down. */
void rlk_loop_wait_resend(rlk_loop_wait *w);
/* Takes w off every list and frees its timer. */
void rlk_loop_wait_end(rlk_loop_wait *w);

#endif
