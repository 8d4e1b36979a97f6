/*
 * A loop client's hold records and its watchdog: the holds taken with lease_ms < 0 are renewed
 * every third of watchdog_timeout_ms by one timer on the loop, the due holds of each side in
 * one call of its script (the threaded watchdog's scripts and batch shape).
 */
#ifndef RLK_LOOP_WATCHDOG_H
#define RLK_LOOP_WATCHDOG_H

#include "lock.h"
#include "loop_client.h"
#include "semaphore.h"

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
/* Records a grant to a->tid of lock (count, token, lease, field, metric kind; the watchdog for a
 * watchdog hold): RLOCK_OK, or RLOCK_ENOMEM. */
int rlk_loop_hold_grant(rlk_loop_client *lc, rlock *lock, const rlk_acq *a);
/* Forgets a record (and stops renewing it). */
void rlk_loop_hold_drop(rlk_loop_client *lc, rlk_loop_hold *h);
/* Puts h under the watchdog: first renewal a third of the lease from now. */
void rlk_loop_wd_add(rlk_loop_client *lc, rlk_loop_hold *h);

/* Puts the leased permit id of sem (taken with lease_ms < 0) under the watchdog, renewed by
 * sem_renew_leased.lua and reported to on_lost with the semaphore's name when found gone:
 * RLOCK_OK, or RLOCK_ENOMEM. */
int rlk_loop_permit_add(rlk_loop_client *lc, rlock_semaphore *sem, const unsigned char id[16]);
/* The record of that permit, NULL if none (drop it with rlk_loop_hold_drop()). */
rlk_loop_hold *rlk_loop_permit_get(rlk_loop_client *lc, const rlock_semaphore *sem,
                                   const unsigned char id[16]);

/* rlock_token_ex() on a loop client's handle (rlock_client.loop_token): the token of owner
 * tid's hold of lock, 0 with none (or a lost one). */
uint64_t rlk_loop_token(rlock *lock, uint64_t tid);

#endif
