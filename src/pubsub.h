/*
 * One subscriber connection per client carries every channel that local waiters listen on.
 * A channel has one ref-counted entry shared by all local waiters; the entry counts wake-up
 * permits so a message that arrives before a waiter sleeps is not lost.
 */
#ifndef RLK_PUBSUB_H
#define RLK_PUBSUB_H

#include "client.h"

typedef struct rlk_sub rlk_sub;

int rlk_pubsub_new(rlock_client *c, rlk_pubsub **out);
void rlk_pubsub_free(rlk_pubsub *ps);

/* Joins the entry for channel (copied), creating it and sending SUBSCRIBE if it is new.
 * Does not wait: the confirmation of the SUBSCRIBE arrives as a wake-up permit, so a waiter's
 * next rlk_sub_wait() returns right after it and the waiter re-attempts (this closes the race of
 * an unlock published before the subscription existed). */
int rlk_sub_join(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out);

/* Waits up to timeout_ms (< 0: without limit) for a permit and consumes it.
 * Returns 1 if woken (a message, a subscription confirmation, or a reconnect), 0 on timeout. */
int rlk_sub_wait(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms);

/* Leaves the entry. When the last waiter leaves, the entry lingers, still subscribed, for a
 * short while (RLK_PS_LINGER_MS in pubsub.c) so that a waiter coming back soon finds it live;
 * then the subscriber thread sends UNSUBSCRIBE. */
void rlk_sub_leave(rlk_pubsub *ps, rlk_sub *s);

/* Changes how long entries without waiters stay subscribed (for tests). */
void rlk_pubsub_set_linger(rlk_pubsub *ps, int64_t ms);

/* Messages read for channels that had an entry (for tests). */
uint64_t rlk_pubsub_messages(rlk_pubsub *ps);

/* Number of channels with local waiters (for tests). */
size_t rlk_pubsub_channel_count(rlk_pubsub *ps);

#endif
