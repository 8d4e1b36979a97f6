/*
 * RedLock's reply decoders (lock_redlock.c), pure functions for tests/fuzz/fuzz_replies.c.
 */
#ifndef RLK_LOCK_REDLOCK_DECODE_H
#define RLK_LOCK_REDLOCK_DECODE_H

#include <stdint.h>

#include <hiredis.h>

/* RedLock (lock_redlock.c), one server's reply in a round. Acquire: 1 granted (*token set), 0
 * held by another owner, -1 unexpected; raise: 1 if the server confirmed a counter >= token;
 * query (EXISTS/HEXISTS): 1 or 0, -1 unexpected. */
int rlk_redlock_check_acquire_reply(const redisReply *rep, uint64_t *token);
int rlk_redlock_check_raise_reply(const redisReply *rep, uint64_t token);
int rlk_redlock_check_query_reply(const redisReply *rep);

#endif
