/*
 * Leased permits (semaphore_leased.c): what semaphore.c asks of them.
 */
#ifndef RLK_SEMAPHORE_LEASED_H
#define RLK_SEMAPHORE_LEASED_H

#include "semaphore.h"

/* Stops the renewals of every leased permit of the handle (at free). */
void rlk_sem_forget_permits(rlock_semaphore *sem);

#endif
