/*
 * The reentrant and spin locks' constructors (lock_reentrant.c).
 */
#ifndef RLK_LOCK_REENTRANT_H
#define RLK_LOCK_REENTRANT_H

#include "lock.h"

rlock *rlk_reentrant_open(rlock_client *c, const char *name);
rlock *rlk_spin_open(rlock_client *c, const char *name);

/* The reentrant lock's attempt as a request (lock_acquire.lua, malloc()ed bytes in *cmd) and its
 * reply's decoder (1 acquired, 0 busy with a->ttl_ms, or an error), for a spin handle on a loop
 * client, whose handle names no attempt_format: with a->may_queue 0 it records no waiter. */
int rlk_reentrant_attempt_format(rlk_acq *a, char **cmd, size_t *len);
int rlk_reentrant_attempt_reply(rlk_acq *a, redisReply *rep);

#endif
