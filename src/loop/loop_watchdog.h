/*
 * A loop client's hold records and its watchdog: the holds taken with lease_ms < 0 are renewed
 * every third of watchdog_timeout_ms by one timer on the loop, the due holds of each side in
 * one call of its script (the threaded watchdog's scripts and batch shape).
 */
#ifndef RLK_LOOP_WATCHDOG_H
#define RLK_LOOP_WATCHDOG_H

#include "lock.h"
#include "loop_client.h"
#include "loop_hold.h"
#include "semaphore.h"

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

#endif
