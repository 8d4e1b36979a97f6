/*
 * The read-write lock's constructor (lock_rw.c).
 */
#ifndef RLK_LOCK_RW_H
#define RLK_LOCK_RW_H

#include "lock.h"

rlock *rlk_rw_open(rlock_client *c, rlock_kind kind, const char *name);

#endif
