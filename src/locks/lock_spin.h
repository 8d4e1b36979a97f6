/*
 * The spin lock's wait (lock_spin.c).
 */
#ifndef RLK_LOCK_SPIN_H
#define RLK_LOCK_SPIN_H

#include "lock.h"

/* The spin lock's wait (lock_spin.c): attempts after pauses of Redisson's exponential back-off
 * until acquired (1), the deadline passes (0) or an error; no subscription. */
int rlk_spin_wait(rlk_acq *a, int64_t deadline);

/* One wait's back-off state, as Redisson's ExponentialBackOffPolicy keeps it; a loop client's
 * spin wait (src/loop) keeps one too. */
typedef struct rlk_spin_backoff {
    int64_t next;  /* the pause after the next busy attempt */
    int fails;     /* busy attempts so far: the bound of the random part */
    unsigned seed; /* rand_r() state, per wait, so that waiters do not pause in step */
} rlk_spin_backoff;

/* A new wait's back-off for owner tid, and the pause after each busy attempt in turn. */
void rlk_spin_backoff_init(rlk_spin_backoff *b, uint64_t tid);
int64_t rlk_spin_next(rlk_spin_backoff *b);

#endif
