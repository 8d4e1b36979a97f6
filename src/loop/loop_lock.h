/*
 * rlock_lock_async() and rlock_unlock_async() (include/rlock_async.h) for the reentrant lock:
 * an operation that attempts, subscribes, waits for a message, its timer or its token, and
 * attempts again (loop_wait.c runs the states); a fair handle's calls go to loop_fair.c.
 * docs/internals/event-loop.md describes the states.
 */
#ifndef RLK_LOOP_LOCK_H
#define RLK_LOOP_LOCK_H

#include "loop_client.h"

#endif
