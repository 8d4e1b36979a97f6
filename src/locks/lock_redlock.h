/*
 * RedLock (lock_redlock.c): what the other files ask of it beyond its reply decoders.
 */
#ifndef RLK_LOCK_REDLOCK_H
#define RLK_LOCK_REDLOCK_H

#include "lock.h"

/* The members of a RedLock, one per server in the caller's order; NULL with *n 0 for any other
 * handle. Loop clients run RedLock's rounds from them (loop/loop_group.c). */
rlock *const *rlk_redlock_members(rlock *l, size_t *n);

#endif
