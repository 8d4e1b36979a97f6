/*
 * What the lock types report to the observation core (base/observe.h): who a report is about,
 * the group flag that keeps a multi-lock's member calls out of the figures, and the end of a
 * hold (released, lost, or forgotten). lock_observe.c; lock_api.c wraps the acquire and unlock
 * calls with them.
 */
#ifndef RLK_LOCK_OBSERVE_H
#define RLK_LOCK_OBSERVE_H

#include "lock.h"

/* How a hold ended, for rlk_hold_obs_end(). */
enum {
    RLK_HOLD_RELEASED = 0, /* a full release: hold histogram, RELEASED */
    RLK_HOLD_LOST = 1,     /* found gone: rlock_lost_total, LOST */
    RLK_HOLD_FORGOTTEN = 2 /* dropped without a release (handle freed): the gauge only */
};

/* Who a report is about: the client, name and kind of a handle (a group: its first member's
 * client and name, its own kind), and the owner when a hook will see it. */
typedef struct rlk_obs_target {
    rlock_client *client;
    const char *name;
    int kind;
    const char *owner;
    char owner_buf[RLK_OWNER_MAX];
} rlk_obs_target;

void rlk_obs_target_of(rlock *l, uint64_t tid, rlk_obs_target *t);

/* 1 while the calling thread is inside a group's acquire or unlock: the member calls it makes
 * are not observed (the group is). rlk_obs_group_set() returns the previous value. */
int rlk_obs_in_group(void);
int rlk_obs_group_set(int on);

/* Reports the end of h's hold once (whoever ends it first: the owner's unlock or the watchdog's
 * loss); nothing for a hold that was never observed (a group's member). Call with no mutex
 * held: the user's hook runs here. */
void rlk_hold_obs_end(rlock *l, rlk_hold *h, int how);

#endif
