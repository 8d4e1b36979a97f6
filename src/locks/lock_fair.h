/*
 * The fair lock's constructor (lock_fair.c).
 */
#ifndef RLK_LOCK_FAIR_H
#define RLK_LOCK_FAIR_H

#include "lock.h"

rlock *rlk_fair_open(rlock_client *c, const char *name);

#endif
