/*
 * rlock_semaphore_acquire_async(), rlock_semaphore_acquire_leased_async() (and its _n form),
 * rlock_semaphore_release_async() and rlock_semaphore_release_leased_async()
 * (include/rlock_async.h): the threaded semaphore's scripts, arguments (src/sync/semaphore.h)
 * and channel, sent on the loop; waiting is loop_wait.c's.
 */
#ifndef RLK_LOOP_SEMAPHORE_H
#define RLK_LOOP_SEMAPHORE_H

#include "loop_wait.h"

#endif
