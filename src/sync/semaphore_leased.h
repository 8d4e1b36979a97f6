/*
 * Leased permits (semaphore_leased.c): what semaphore.c asks of them.
 */
#ifndef RLK_SEMAPHORE_LEASED_H
#define RLK_SEMAPHORE_LEASED_H

#include "semaphore.h"

/* Stops the renewals of every leased permit of the handle (at free). */
void rlk_sem_forget_permits(rlock_semaphore *sem);

/* Parses a permit id of RLOCK_PERMIT_ID_LEN hex digits into its 16 bytes: RLOCK_OK, or
 * RLOCK_EINVAL with a message. */
int rlk_sem_unhex(const char *text, unsigned char id[16]);

/* The keys and arguments of sem_update_lease.lua (a lease of lease_ms from now) or
 * sem_lease_left.lua (lease_ms unused) for the permit id, borrowing sem and id. */
void rlk_sem_lease_args(const rlock_semaphore *sem, int script, const unsigned char id[16],
                        int64_t lease_ms, rlk_args *keys, rlk_args *args);

#endif
