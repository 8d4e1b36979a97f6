/*
 * rlock_lock_async() and rlock_unlock_async() for a multi-lock or RedLock whose members are
 * handles of loop clients on one loop: the group's rounds composed of its members' own loop
 * operations (loop_lock.c, loop_fair.c), with a pause timer between rounds.
 */
#ifndef RLK_LOOP_GROUP_H
#define RLK_LOOP_GROUP_H

#include "lock.h"
#include "rlock_async.h"

/* rlock_lock_async() on a group handle: its checks, then RLOCK_OK and done later. */
int rlk_loop_group_lock(rlock *group, const rlock_lock_args *args, rlock_done_fn done,
                        void *user_data);
/* rlock_unlock_async() on a group handle: every member released, done once they answered. */
int rlk_loop_group_unlock(rlock *group, rlock_owner *owner, rlock_done_fn done, void *user_data);

#endif
