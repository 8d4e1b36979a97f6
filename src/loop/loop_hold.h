/*
 * A loop client's hold records (rlk_loop_hold, loop_client.h): one per owner, lock name and side,
 * kept by the grants and releases (loop_watchdog.c renews them) and read by rlock_token_ex().
 */
#ifndef RLK_LOOP_HOLD_H
#define RLK_LOOP_HOLD_H

#include "lock.h"
#include "loop_client.h"

/* A hold record's side: a read-write lock's read and write holds of one owner on one name are
 * two records, renewed by rw_renew_read.lua and rw_renew_write.lua; every other hold is a hash
 * field renewed by renew_hash.lua. */
enum { RLK_LOOP_HASH = 0, RLK_LOOP_READ = 1, RLK_LOOP_WRITE = 2 };
/* The side of lock's holds. */
int rlk_loop_hold_side(const rlock *lock);
/* The record of owner tid's hold of lock name on side, NULL if none; with create, a new empty
 * one (NULL when out of memory). */
rlk_loop_hold *rlk_loop_hold_get(rlk_loop_client *lc, const char *name, size_t len, uint64_t tid,
                                 int side, int create);
/* rlock_token_ex() on a loop client's handle (rlock_client.loop_token): the token of owner
 * tid's hold of lock, 0 with none (or a lost one). */
uint64_t rlk_loop_token(rlock *lock, uint64_t tid);

#endif
