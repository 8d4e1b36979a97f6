/*
 * The watchdog's reply decoder (watchdog.c), a pure function: tests/fuzz/fuzz_replies.c feeds it
 * arbitrary replies.
 */
#ifndef RLK_WATCHDOG_DECODE_H
#define RLK_WATCHDOG_DECODE_H

#include <stddef.h>

#include <hiredis.h>

/* The watchdog's batch renewal reply (watchdog.c) for n entries: the result of entry i, 1
 * renewed, 0 gone, -1 unknown (not an integer, or a reply of another shape: retried later). */
int rlk_wd_check_batch_item(const redisReply *rep, size_t n, size_t i);

#endif
