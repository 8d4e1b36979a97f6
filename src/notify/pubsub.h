/*
 * One subscriber connection per client carries every channel that local waiters listen on.
 * A channel has one ref-counted entry shared by all local waiters; the entry counts wake-up
 * permits so a message that arrives before a waiter sleeps is not lost. This header declares
 * pubsub.c's functions; pubsub_armed.h and pubsub_conn.h those of pubsub_armed.c and
 * pubsub_conn.c.
 */
#ifndef RLK_PUBSUB_H
#define RLK_PUBSUB_H

#include <hiredis.h>

#include "context.h"

typedef struct rlk_sub rlk_sub;

/* A waiter's next attempt, formatted in advance (an "armed" attempt). While the waiter sleeps,
 * a "0" message on its channel (wake one waiter) can be answered by the subscriber thread
 * sending these bytes on an idle pool connection as it wakes the waiter, instead of giving a
 * permit: Redis then runs the attempt while the waiter is being scheduled, not after. Among
 * several armed waiters of one channel the one that has slept longest is chosen. Its state is
 * the subscriber's (pubsub_impl.h); pubsub_armed.h declares what pubsub_armed.c does with it. */
typedef struct rlk_armed rlk_armed;

/* Starts a's wait on s: from now on, every wake-up of all of s's waiters (a confirmation, a
 * reconnect, a "1") wakes a's owner once, even when faster waiters took the permits it gave. A
 * release may have granted the lock to exactly that waiter unheard, so it must attempt again. */
void rlk_armed_begin(rlk_pubsub *ps, rlk_sub *s, rlk_armed *a);

/* The subscriber mutex, held across fork() so that the child inherits consistent state. */
void rlk_pubsub_fork_lock(rlk_pubsub *ps);
void rlk_pubsub_fork_unlock(rlk_pubsub *ps);

/* Joins the entry for channel (copied), creating it and sending SUBSCRIBE if it is new.
 * Does not wait: the confirmation of the SUBSCRIBE arrives as a wake-up permit, so a waiter's
 * next rlk_sub_wait() returns right after it and the waiter re-attempts (this closes the race of
 * an unlock published before the subscription existed). */
int rlk_sub_join(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out);

/* How many SUBSCRIBE confirmations the subscriber has read so far. A waiter reads it before its
 * first attempt; when it has grown by the time the waiter has joined its channels, a confirmation
 * came in between, after which the joiner gets no permit (it joined a live subscription), yet a
 * release published before that confirmation reached nobody: the waiter attempts once more
 * instead of sleeping (lock_wait.c, rlk_wait_loop). */
uint64_t rlk_pubsub_confirms(rlk_pubsub *ps);

/* How a channel's messages become wake-up permits. Locks use RLK_MSG_LOCK ("1" wakes every
 * local waiter, anything else one, possibly through an armed attempt). Semaphores use
 * RLK_MSG_COUNT: the message is a number N of permits that may have become available and gives
 * min(N, waiters) permits (none for N <= 0 or a non-number), so releasing k permits wakes at most
 * k local waiters. The latch uses RLK_MSG_ZERO_ALL: "0" (the count reached zero) wakes every
 * waiter, anything else (Redisson's "1", a new count) nobody. */
enum { RLK_MSG_LOCK = 0, RLK_MSG_COUNT, RLK_MSG_ZERO_ALL, RLK_MSG_NAMED };

/* rlk_sub_join() for a channel whose messages follow mode (RLK_MSG_*). */
int rlk_sub_join_mode(rlk_pubsub *ps, const char *channel, size_t len, int mode, rlk_sub **out);

/* rlk_sub_join() for a lock channel that other clients' waiters may listen on too (Redisson's),
 * subscribed as a pattern that matches that channel alone (PSUBSCRIBE, glob characters escaped):
 * the messages are the same, but PUBSUB NUMSUB does not count this client, so that a release can
 * tell whether anyone but rlock clients listens there. If Redis refuses the PSUBSCRIBE (an ACL
 * without it), the entry, and every later one of this client, subscribes plainly. */
int rlk_sub_join_pattern(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out);

/* Joins channel as a wake channel (RLK_MSG_NAMED) of the lock channel twin, which the caller
 * has joined first (rlk_sub_join_pattern or rlk_sub_join). A message on it names the one waiter
 * ("<uuid>:<tid>", then " 0" if the release's "0" on twin follows on the same connection; or
 * "grant <token> <wait> <uuid>:<tid>" when the release granted it the lock, which reaches the
 * named armed waiter as RLK_WAIT_GRANTED, or else as a permit of twin) a release wakes: this client
 * wakes the named waiter (through its armed attempt, or a permit of twin) and, when the name says a
 * "0" follows, lets that "0" pass. The wake channel is this client's own (the reentrant lock names
 * it after the client's UUID), so a release reaches one client, not every client that waits. A "0"
 * on twin not announced so (a Redisson client's release) wakes one waiter as before. The wake
 * channel's SUBSCRIBE confirmation gives every waiter of twin a permit, as twin's own does. Nobody
 * waits on the returned entry; rlk_sub_leave() it with the twin. */
int rlk_sub_join_named(rlk_pubsub *ps, const char *channel, size_t len, const char *twin,
                       size_t twin_len, rlk_sub **out);

/* The glob pattern that matches channel p (len bytes) and nothing else: Redis' special
 * characters escaped with a backslash, *out_len its length. NUL-terminated, malloc()ed; NULL
 * without memory. */
char *rlk_literal_pattern(const char *p, size_t len, size_t *out_len);

/* What rlk_sub_wait() returns besides a negative error. */
#define RLK_WAIT_TIMEOUT     0 /* the timeout passed without a wake-up */
#define RLK_WAIT_WOKEN       1 /* a permit: a message, a subscription confirmation or a reconnect */
#define RLK_WAIT_REPLY       2 /* the armed attempt was sent: rlk_armed_take_reply() has the reply */
#define RLK_WAIT_INTERRUPTED 3 /* rlk_pubsub_interrupt() was called: no permit consumed */
/* A release granted the lock to the armed waiter and said so on its wake channel ("grant
 * <token> <wait> <owner>", lua/lock_release.lua): the waiter holds the lock, rlk_armed_token() has
 * the token; no attempt was sent. A waiter whose grants need its replicas' acknowledgement takes
 * it as a call to attempt (lock_wait.c). */
#define RLK_WAIT_GRANTED 4

/* Waits up to timeout_ms (< 0: without limit) for a permit and consumes it. armed (may be NULL)
 * is offered to the subscriber thread while this waiter sleeps; when the thread sent it, the
 * reply is read here, on the connection it went out on, which goes back to the pool, and the
 * call returns RLK_WAIT_REPLY. Errors: RLOCK_ECONN if reading that reply failed (the attempt's
 * outcome is unknown), or if Redis did not confirm the channel's SUBSCRIBE within
 * subscription_timeout_ms; RLOCK_EREDIS if Redis refused the SUBSCRIBE (an ACL without the channel,
 * say). */
int rlk_sub_wait(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed);

/* The token fired (rlk_sub_wait_cancel): no permit consumed, so a wake-up meant for this waiter
 * stays for another. A claimed armed attempt or a kept grant still comes first (RLK_WAIT_REPLY,
 * RLK_WAIT_GRANTED): a grant racing with the cancel is never dropped. */
#define RLK_WAIT_CANCELED 5
/* rlk_sub_wait() that also ends when cancel (NULL: never) fires, within the cancel thread's
 * wake-up (cancel.h): RLK_WAIT_CANCELED. A token fired before the call ends it at once. */
int rlk_sub_wait_cancel(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed,
                        const rlock_cancel *cancel);

/* Leaves the entry. When the last waiter leaves, the entry lingers, still subscribed, for a
 * short while (RLK_PS_LINGER_MS, pubsub_impl.h) so that a waiter coming back soon finds it live;
 * then the subscriber thread sends UNSUBSCRIBE. */
void rlk_sub_leave(rlk_pubsub *ps, rlk_sub *s);

/* Makes every rlk_sub_wait(), now and later, return 2 at once (rlock_client_interrupt). */
void rlk_pubsub_interrupt(rlk_pubsub *ps);
/* 1 once rlk_pubsub_interrupt() was called. */
int rlk_pubsub_interrupted(rlk_pubsub *ps);

/* Changes how long entries without waiters stay subscribed (for tests). */
void rlk_pubsub_set_linger(rlk_pubsub *ps, int64_t ms);

/* Messages read for channels that had an entry (for tests). */
uint64_t rlk_pubsub_messages(rlk_pubsub *ps);

/* Number of channels with local waiters (for tests). */
size_t rlk_pubsub_channel_count(rlk_pubsub *ps);

#endif
