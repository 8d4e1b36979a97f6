/*
 * The read-write lock's reply decoders (lock_rw.c), exported unchanged so that
 * tests/fuzz/fuzz_replies.c can feed them arbitrary replies and loop clients (src/loop/loop_rw.c)
 * decode their attempts' replies.
 */
#ifndef RLK_LOCK_RW_DECODE_H
#define RLK_LOCK_RW_DECODE_H

#include "lock.h"

/* Decodes the {status, value} reply of rw_read_acquire.lua / rw_write_acquire.lua into a. */
int rlk_rw_check_acquire_reply(rlk_acq *a, const redisReply *r);
/* Decodes the -1/0/1 reply (or {-1/0/1, refusal}) of both rw release scripts; frees r, as the
 * release path does; a refused PUBLISH is logged once per client c. */
int rlk_rw_check_release_reply(rlock_client *c, redisReply *r);

#endif
