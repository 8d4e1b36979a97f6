/*
 * The count-down latch's handle (latch.c) and the builders and decoders its calls share with
 * loop clients (src/loop/loop_latch.c), which send the same commands without blocking.
 */
#ifndef RLK_LATCH_H
#define RLK_LATCH_H

#include "semaphore.h"

struct rlock_latch {
    rlock_client *client;
    rlk_buf channel; /* redisson_countdownlatch__channel__{name}: braces always, as Redisson */
    size_t name_len;
    char name[];
};

/* The keys of latch_try_set.lua, [name, channel] (its argument is the count), borrowing l. */
void rlk_latch_keys(const rlock_latch *l, rlk_args *keys);
/* The keys and arguments of latch_count_down.lua and latch_delete.lua for the request q,
 * borrowing l and q. */
void rlk_latch_keyed_args(const rlock_latch *l, const rlk_sem_req *q, rlk_args *keys,
                          rlk_args *args);
/* The command that reads the count (GET name), borrowing l. */
void rlk_latch_count_args(const rlock_latch *l, rlk_args *argv);
/* Its reply decoded: the count (0 for an absent key or a count below 0), or RLOCK_EPROTO. */
int64_t rlk_latch_count_reply(const rlock_latch *l, const redisReply *rep);

#endif
