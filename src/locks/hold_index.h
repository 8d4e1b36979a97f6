/*
 * Which handle holds an owner's record (hold_index.c).
 */
#ifndef RLK_HOLD_INDEX_H
#define RLK_HOLD_INDEX_H

#include "lock.h"

/* The index of owners' hold records (hold_index.c): add/remove as a record of an owner (tid >=
 * RLK_OWNER_TID_BASE; a no-op for threads) is created and forgotten; find gives the handle of
 * the same lock (client, type, name) that holds tid's record when l does not, else l (groups:
 * always l). The handle found must stay open while it is used. */
void rlk_hold_index_add(rlock *l, uint64_t tid);
void rlk_hold_index_remove(rlock *l, uint64_t tid);
rlock *rlk_hold_index_find(rlock *l, uint64_t tid);

#endif
