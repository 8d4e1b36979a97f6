/*
 * One subscriber connection per client carries every channel that local waiters listen on.
 * A channel has one ref-counted entry shared by all local waiters; the entry counts wake-up
 * permits so a message that arrives before a waiter sleeps is not lost.
 */
#ifndef RLK_PUBSUB_H
#define RLK_PUBSUB_H

#include "client.h"

typedef struct rlk_sub rlk_sub;

/* A waiter's next attempt, formatted in advance (an "armed" attempt). While the waiter sleeps,
 * a "0" message on its channel (wake one waiter) can be answered by the subscriber thread
 * sending these bytes on an idle pool connection as it wakes the waiter, instead of giving a
 * permit: Redis then runs the attempt while the waiter is being scheduled, not after. Among
 * several armed waiters of one channel the one that has slept longest is chosen. The waiter
 * reads the reply from conn. The fields other than cmd and len belong to the subscriber (read
 * state and conn after rlk_sub_wait). */
enum { RLK_ARMED_IDLE = 0, RLK_ARMED_SENT };
typedef struct rlk_armed {
    const char *cmd;
    size_t len;
    pthread_cond_t cv;        /* an armed waiter sleeps here (rlk_armed_init) */
    int state;                /* RLK_ARMED_SENT: the attempt was sent on conn */
    int inflight;             /* the subscriber thread still uses cmd and cv */
    struct rlk_conn *conn;    /* borrowed from the pool; the waiter reads and returns it */
    struct rlk_armed *next;   /* the subscriber thread's list */
    struct rlk_armed *aprev, *anext; /* the entry's list of sleeping armed waiters */
    int listed;
} rlk_armed;

int rlk_pubsub_new(rlock_client *c, rlk_pubsub **out);
void rlk_pubsub_free(rlk_pubsub *ps);

/* Joins the entry for channel (copied), creating it and sending SUBSCRIBE if it is new.
 * Does not wait: the confirmation of the SUBSCRIBE arrives as a wake-up permit, so a waiter's
 * next rlk_sub_wait() returns right after it and the waiter re-attempts (this closes the race of
 * an unlock published before the subscription existed). */
int rlk_sub_join(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out);

/* Waits up to timeout_ms (< 0: without limit) for a permit and consumes it.
 * Returns 1 if woken (a message, a subscription confirmation, or a reconnect), 0 on timeout,
 * 2 if the subscriber was interrupted (rlk_pubsub_interrupt; no permit consumed).
 * armed (may be NULL) is offered to the subscriber thread while this waiter sleeps alone on the
 * entry; after the call, armed->state == RLK_ARMED_SENT says the attempt was sent on
 * armed->conn, and the caller must read its reply there and return the connection. */
int rlk_sub_wait(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed);

/* After an armed attempt was sent (state RLK_ARMED_SENT) and its reply read: waits until the
 * subscriber thread no longer touches the record (in practice it finished long before the
 * reply came back), so that it may be reused or destroyed. */
void rlk_armed_settle(rlk_pubsub *ps, rlk_armed *a);

/* Prepares an armed attempt for the request bytes cmd/len (kept by the caller), and frees what
 * rlk_armed_init() set up. */
void rlk_armed_init(rlk_armed *a, const char *cmd, size_t len);
void rlk_armed_destroy(rlk_armed *a);

/* Leaves the entry. When the last waiter leaves, the entry lingers, still subscribed, for a
 * short while (RLK_PS_LINGER_MS in pubsub.c) so that a waiter coming back soon finds it live;
 * then the subscriber thread sends UNSUBSCRIBE. */
void rlk_sub_leave(rlk_pubsub *ps, rlk_sub *s);

/* Makes every rlk_sub_wait(), now and later, return 2 at once (rlock_client_interrupt). */
void rlk_pubsub_interrupt(rlk_pubsub *ps);
/* 1 once rlk_pubsub_interrupt() was called. */
int rlk_pubsub_interrupted(rlk_pubsub *ps);

/* Changes how long entries without waiters stay subscribed (for tests). */
void rlk_pubsub_set_linger(rlk_pubsub *ps, int64_t ms);

/* Armed attempts the subscriber thread sent (for tests and benchmarks). */
uint64_t rlk_pubsub_armed_sent(rlk_pubsub *ps);

/* Messages read for channels that had an entry (for tests). */
uint64_t rlk_pubsub_messages(rlk_pubsub *ps);

/* Number of channels with local waiters (for tests). */
size_t rlk_pubsub_channel_count(rlk_pubsub *ps);

#endif
