/*
 * The subscriber's decoders of what Redis pushes (pubsub_dispatch.c), pure functions:
 * tests/fuzz/fuzz_replies.c feeds them arbitrary replies.
 */
#ifndef RLK_PUBSUB_DECODE_H
#define RLK_PUBSUB_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

/* The subscriber's parsing of what arrives on its connection (pubsub_dispatch.c): the kind of a
 * push (RLK_PUSH_*; for a message or confirmation *channel, *len and *payload are set: a pattern's
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

#endif
