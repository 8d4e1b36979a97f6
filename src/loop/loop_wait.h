/*
 * The one waiting operation of a loop client, shared by every type that waits (the reentrant and
 * fair locks, the semaphore, the latch): it attempts, joins its channel, sleeps until a message,
 * its timer or its token, and attempts again, by the rules of rlock_async.h. The type's table
 * (rlk_loop_wait_ops) sends each attempt, decodes its reply and leaves its queue on a give-up.
 */
#ifndef RLK_LOOP_WAIT_H
#define RLK_LOOP_WAIT_H

#include "loop_due.h"

typedef struct rlk_loop_wait rlk_loop_wait;

/* What a waiting type does; the optional entries may be NULL. */
typedef struct rlk_loop_wait_ops {
    /* Sends one attempt whose reply calls rlk_loop_wait_result(): RLOCK_OK or an error. */
    int (*attempt)(rlk_loop_wait *w);
    /* Joins the type's channel with rlk_loop_join() and returns what it returned. */
    int (*join)(rlk_loop_wait *w);
    /* Sets the thread's message for an end the mechanism decides itself (RLOCK_ETIMEDOUT,
     * RLOCK_ECANCELED, RLOCK_ECLOSED). */
    void (*say)(rlk_loop_wait *w, int rc);
    /* Called once w is off every list with its timer freed: records the outcome, frees the
     * type's record and runs its done with rc. */
    void (*complete)(rlk_loop_wait *w, int rc);
    /* Optional, a queueing type's give-up: 1 when a leave was sent whose reply calls
     * rlk_loop_wait_left(), 0 when there is nothing to leave. */
    int (*leave)(rlk_loop_wait *w);
    /* Optional: the client is being freed with its connections still open: queue the leave as a
     * last request whose reply is not read, and return 1, else 0. */
    int (*close_leave)(rlk_loop_wait *w);
    /* Optional, a lock's: sends the release that gives back a grant fewer replicas acknowledged,
     * with no WAIT; its reply calls fn with the type's record. RLOCK_OK or an error. */
    int (*give_back)(rlk_loop_wait *w, rlk_lconn_reply_fn fn);
    /* Optional: a message on the wake channel of a named channel (rlk_loop_join_named()): 1
     * when it was meant for w, 0 when not. */
    int (*told)(rlk_loop_wait *w, const char *msg, size_t len);
} rlk_loop_wait_ops;

/* The common part of a waiting operation's record, embedded in the type's. Its states: an
 * attempt (or the settlement of a lost one) in flight, asleep on the channel and the timer, or
 * leaving the queue after a give-up; only the reply of what is in flight may end it then. */
struct rlk_loop_wait {
    rlk_loop_op base;
    const rlk_loop_wait_ops *ops;
    void (*done)(void); /* the type's done callback, cast back to its type by complete */
    void *user_data;
    int64_t deadline;       /* monotonic ms, INT64_MAX: none */
    rlk_loop_due due;       /* the next attempt or the end of the sleep (loop_due.h) */
    int end_rc;             /* the give-up's code, reported after the leave's reply */
    unsigned char inflight; /* an attempt or the leave is on its way */
    unsigned char resend;   /* rlk_loop_wait_resend(): the timer sends the attempt */
    unsigned char woken;    /* a message or confirmation came while an attempt was on its way */
    unsigned char leaving;  /* the leave was sent (a reply is awaited, or none at the free) */
};

/* A deadline for wait_ms: none for a negative one or one above RLOCK_MAX_DURATION_MS. */
int64_t rlk_loop_deadline(int64_t wait_ms);
/* Starts w (ops, done, user_data and deadline set by the caller) with cancel (NULL: none): on
 * the client's list, first attempt sent. RLOCK_OK, or an error with w on no list and no timer
 * (the caller frees it; done never runs). */
int rlk_loop_wait_start(rlk_loop_client *lc, rlk_loop_wait *w, const rlock_cancel *cancel);
/* An attempt's outcome: r 1 done (complete gets RLOCK_OK), 0 busy (sleep_ms >= 0: attempt
 * again after it at the latest; < 0: at the next message or after subscription_timeout_ms), or
 * a negative error (a give-up, but RLOCK_ECLOSED ends at once: the free queued the leave). */
void rlk_loop_wait_result(rlk_loop_wait *w, int r, int64_t sleep_ms);
/* The leave's reply came (err as the reply callback got it): complete with the give-up's
 * code, or RLOCK_ECLOSED when the client was freed meanwhile. */
void rlk_loop_wait_left(rlk_loop_wait *w, int err);
/* The waiting operation op is, NULL when op is another kind of operation. */
rlk_loop_wait *rlk_loop_wait_of(rlk_loop_op *op);
/* A message meant for w: as its channel's message wakes it (an attempt follows, or the reply
 * on its way decides). */
void rlk_loop_wait_wake(rlk_loop_wait *w);
/* Calls attempt again at the loop's next turn, the operation staying in flight meanwhile (no
 * token, deadline or message ends it): for a follow-up request of the type's that cannot be
 * sent from inside the failed request's reply, whose connection is still being torn down. */
void rlk_loop_wait_resend(rlk_loop_wait *w);

#endif
