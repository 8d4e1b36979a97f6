/*
 * Reply checks callable without a connection. Every script caller decodes its reply in a function
 * of its own; most are reachable through rlk_single_ops (attempt_reply) or are shared helpers
 * (rlk_reply_int, rlk_reply_is_noscript). The read-write lock's two decoders are static in
 * lock_rw.c and are exported here, unchanged, so that tests/fuzz/fuzz_replies.c can feed them
 * arbitrary replies.
 */
#ifndef RLK_REPLY_CHECKS_H
#define RLK_REPLY_CHECKS_H

#include "lock.h"
#include "pubsub.h"

/* Decodes the {status, value} reply of rw_read_acquire.lua / rw_write_acquire.lua into a. */
int rlk_rw_check_acquire_reply(rlk_acq *a, const redisReply *r);
/* Decodes the -1/0/1 reply (or {-1/0/1, refusal}) of both rw release scripts; frees r, as the
 * release path does; a refused PUBLISH is logged once per client c. */
int rlk_rw_check_release_reply(rlock_client *c, redisReply *r);

/* RedLock (lock_redlock.c), one server's reply in a round. Acquire: 1 granted (*token set), 0
 * held by another owner, -1 unexpected; raise: 1 if the server confirmed a counter >= token;
 * query (EXISTS/HEXISTS): 1 or 0, -1 unexpected. */
int rlk_redlock_check_acquire_reply(const redisReply *rep, uint64_t *token);
int rlk_redlock_check_raise_reply(const redisReply *rep, uint64_t token);
int rlk_redlock_check_query_reply(const redisReply *rep);

/* The watchdog's batch renewal reply (watchdog.c) for n entries: the result of entry i, 1
 * renewed, 0 gone, -1 unknown (not an integer, or a reply of another shape: retried later). */
int rlk_wd_check_batch_item(const redisReply *rep, size_t n, size_t i);

/* The subscriber's parsing of what arrives on its connection (pubsub.c): the kind of a push
 * (RLK_PUSH_*; for a message or confirmation *channel, *len and *payload are set: a pattern's
 * message gives the channel it was published on, a pattern's confirmation the pattern); the permits
 * a message gives in a counting mode (RLK_MSG_COUNT, RLK_MSG_ZERO_ALL; INT_MAX = every waiter); and
 * whether a lock message wakes every waiter ("1"). */
enum {
    RLK_PUSH_OTHER = 0,
    RLK_PUSH_ERROR,
    RLK_PUSH_MESSAGE,
    RLK_PUSH_CONFIRM,
    RLK_PUSH_PMESSAGE,
    RLK_PUSH_PCONFIRM
};
int rlk_push_parse(const redisReply *r, const char **channel, size_t *len,
                   const redisReply **payload);
int rlk_msg_permits(int mode, const redisReply *m);
int rlk_msg_wakes_all(const redisReply *m);
/* A grant on a wake channel, "grant <token> <wait> <owner>" (lua/lock_release.lua): 1 with
 * *token, the waiter's wait id *wait and the offset of the owner in msg (*tag_at; at least one
 * byte follows), 0 for any other message (a plain name "<uuid>:<tid>[ 0]" never starts with
 * "grant "). */
int rlk_grant_parse(const char *msg, size_t len, uint64_t *token, uint64_t *wait, size_t *tag_at);

/* rlock_inspect()'s decoder (inspect.c): fills info (whose name is set) from inspect.lua's reply;
 * RLOCK_OK, RLOCK_EPROTO or RLOCK_EINVAL (not a lock). The caller frees info's arrays. */
int rlk_inspect_check_reply(const redisReply *r, rlock_lock_info *info);

#endif
