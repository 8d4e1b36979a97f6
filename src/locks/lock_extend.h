/*
 * The extend of hash-based lock types (lock_extend.c); rlk_single_extend() is declared with
 * the generic calls in lock.h.
 */
#ifndef RLK_LOCK_EXTEND_H
#define RLK_LOCK_EXTEND_H

#include "lock.h"

/* The extend of hash-based types (rlk_single_ops.extend): lua/lock_extend.lua on a->field;
 * rlk_hash_extend_read() passes a read owner's timeout-key prefix too. 1 when extended,
 * RLK_NOT_HELD when the field is gone, or a negative error. */
int rlk_hash_extend(rlk_acq *a, int64_t lease_ms);
int rlk_hash_extend_read(rlk_acq *a, int64_t lease_ms, const rlk_buf *timeout_prefix);

#endif
