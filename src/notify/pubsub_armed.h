/*
 * Armed attempts (pubsub_armed.c): making one, naming its waiter and wait, and what its owner
 * reads after rlk_sub_wait() (pubsub.h).
 */
#ifndef RLK_PUBSUB_ARMED_H
#define RLK_PUBSUB_ARMED_H

#include <hiredis.h>

#include "pubsub.h"

/* Makes an armed attempt of the request bytes cmd/len, taking cmd (malloc()ed) over: it is
 * freed by rlk_armed_free() or, on failure (RLOCK_ENOMEM, *out NULL), at once. */
int rlk_armed_new(char *cmd, size_t len, rlk_armed **out);
void rlk_armed_free(rlk_armed *a);
/* Names the armed waiter (its owner field, at most RLK_OWNER_MAX - 1 bytes), so that a named
 * wake-up (RLK_MSG_NAMED) reaches it and no other waiter of its channel, and its wait (an id
 * unique in the process, rlk_acq.wait_id), so that a grant made in an earlier wait of the same
 * thread is never taken for one of this wait. */
void rlk_armed_set_tag(rlk_armed *a, const char *tag, size_t len, uint64_t wait);
/* Gives a's wait a new grant identity (lock_wait.c, wait_rewait): wait becomes the id a
 * grant's message must name, cmd/len (malloc()ed, taken over; NULL keeps the old request) the
 * attempt that registers it on Redis, and a grant kept on s for a's waiter is dropped: no grant
 * made for the old identity is taken after this. a must be a's owner's alone (between two calls
 * of rlk_sub_wait()). */
void rlk_armed_rewait(rlk_pubsub *ps, rlk_sub *s, rlk_armed *a, char *cmd, size_t len, int tail,
                      uint64_t wait);
/* Says that cmd carries tail requests behind the attempt (a replica-synced client's WAIT,
 * lock_wait.c), whose replies its owner reads after RLK_WAIT_REPLY on the connection that
 * rlk_armed_take_conn() hands over. Such a waiter confirms its grants instead of believing their
 * messages: a grant naming its wait sends its attempt, which finds the grant (its own field in
 * the lock hash) and is believed only once the replicas acknowledged it. */
void rlk_armed_set_tail(rlk_armed *a, int tail);
/* After RLK_WAIT_REPLY of an attempt with a tail: the connection it went out on, where the tail's
 * replies wait; the caller returns it to the pool. */
struct rlk_conn *rlk_armed_take_conn(rlk_armed *a);
/* Drops a grant kept on s for armed's waiter (pubsub_impl.h, rlk_pending_grant) when its wait
 * ends otherwise (its own attempt found the grant): a kept grant is for one wait only, and the
 * few slots of an entry must stay free for the one grant of the lock that may be outstanding. */
void rlk_armed_end_wait(rlk_pubsub *ps, rlk_sub *s, rlk_armed *armed);
/* After rlk_sub_wait() returned RLK_WAIT_GRANTED: the fencing token of the grant; after
 * RLK_WAIT_REPLY: that of the grant the attempt was sent to confirm, 0 for a wake-up. */
uint64_t rlk_armed_token(const rlk_armed *a);
/* After rlk_sub_wait() returned RLK_WAIT_REPLY: the reply to the attempt (an error reply
 * included, such as NOSCRIPT), which the caller now owns and frees. */
redisReply *rlk_armed_take_reply(rlk_armed *a);

/* Armed attempts the subscriber thread sent (for tests and benchmarks). */
uint64_t rlk_pubsub_armed_sent(rlk_pubsub *ps);

/* For the subscriber's files only (pubsub_impl.h has the record's state): all called with the
 * mutex held except rlk_send_armed() and rlk_armed_finish(). */
void rlk_armed_link(rlk_sub *s, rlk_armed *a);
void rlk_armed_unlink(rlk_sub *s, rlk_armed *a);
int rlk_claim_armed(rlk_pubsub *ps, rlk_sub *s);
/* rlk_claim_armed() for the sleeping armed waiter of s tagged tag (len bytes), if any:
 * RLOCK_ECONN when there is none or no idle connection. */
int rlk_claim_armed_tagged(rlk_pubsub *ps, rlk_sub *s, const char *tag, size_t len);
/* A release granted the lock to the sleeping armed waiter of s tagged tag (len bytes) in its wait
 * wait (rlk_armed_set_tag): it is woken alone with RLK_WAIT_GRANTED and token, sending nothing
 * (no connection needed, so cluster clients too). RLOCK_ECONN when no waiter so tagged sleeps
 * armed; RLOCK_EINVAL when it sleeps in another wait (the grant was for an earlier one). */
int rlk_grant_armed_tagged(rlk_pubsub *ps, rlk_sub *s, const char *tag, size_t len, uint64_t wait,
                           uint64_t token);
void rlk_send_armed(rlk_pubsub *ps);
/* Keeps a grant for the waiter of s tagged tag, wait wait, who is not asleep (rlk_pending_grant).
 * Mutex held. */
void rlk_grant_pending(rlk_sub *s, const char *tag, size_t len, uint64_t wait, uint64_t token);
/* Takes a grant kept for armed's waiter (its tag and wait) off s: 1 with armed's state GRANTED and
 * its token set, else 0; a kept grant of an earlier wait of the same tag is dropped. Mutex held. */
int rlk_grant_take_pending(rlk_sub *s, rlk_armed *armed);
/* The owner's side after the thread sent its attempt: reads the reply on a->conn into
 * a->reply, waits until the thread no longer touches the record, and returns the connection to
 * the pool. RLK_WAIT_REPLY, or RLOCK_ECONN. */
int rlk_armed_finish(rlk_pubsub *ps, rlk_armed *a);

#endif
