/*
 * The multi-lock (lock_multi.c): what the other lock files ask of it.
 */
#ifndef RLK_LOCK_MULTI_H
#define RLK_LOCK_MULTI_H

#include "lock.h"

/* The members of a multi-lock (whose holds carry its loss callback, lock_lost.c); NULL with *n 0
 * for any other handle. */
rlock *const *rlk_group_members(rlock *l, size_t *n);

#endif
