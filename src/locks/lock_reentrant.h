/*
 * The reentrant and spin locks' constructors (lock_reentrant.c).
 */
#ifndef RLK_LOCK_REENTRANT_H
#define RLK_LOCK_REENTRANT_H

#include "lock.h"

rlock *rlk_reentrant_open(rlock_client *c, const char *name);
rlock *rlk_spin_open(rlock_client *c, const char *name);

#endif
