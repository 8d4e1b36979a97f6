/*
 * rlock_inspect()'s reply decoder (inspect.c), a pure function for tests/fuzz/fuzz_replies.c.
 */
#ifndef RLK_INSPECT_DECODE_H
#define RLK_INSPECT_DECODE_H

#include <hiredis.h>

#include "rlock.h"

/* rlock_inspect()'s decoder (inspect.c): fills info (whose name is set) from inspect.lua's reply;
 * RLOCK_OK, RLOCK_EPROTO or RLOCK_EINVAL (not a lock). The caller frees info's arrays. */
int rlk_inspect_check_reply(const redisReply *r, rlock_lock_info *info);

#endif
