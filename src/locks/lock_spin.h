/*
 * The spin lock's wait (lock_spin.c).
 */
#ifndef RLK_LOCK_SPIN_H
#define RLK_LOCK_SPIN_H

#include "lock.h"

/* The spin lock's wait (lock_spin.c): attempts after pauses of Redisson's exponential back-off
 * until acquired (1), the deadline passes (0) or an error; no subscription. */
int rlk_spin_wait(rlk_acq *a, int64_t deadline);

#endif
