/*
 * The release of single-key locks and the settling of unsure outcomes (lock_release.c);
 * rlk_single_unlock() is declared with the generic calls in lock.h.
 */
#ifndef RLK_LOCK_RELEASE_H
#define RLK_LOCK_RELEASE_H

#include "lock.h"

/* Settles an attempt whose outcome was unknown (RLK_UNSURE_GRANT, and a give-up that did not
 * reach Redis, RLK_UNSURE_LEAVE) against the hold count on Redis, giving back a hold the record
 * does not count. RLOCK_OK (the marks cleared) or a negative error. */
int rlk_settle_grant(rlk_acq *a, rlk_hold *h);

#endif
