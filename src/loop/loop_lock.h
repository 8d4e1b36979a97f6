/*
 * rlock_lock_async() and rlock_unlock_async() (include/rlock_async.h) for the reentrant lock:
 * an operation that attempts, subscribes, waits for a message, its timer or its token, and
 * attempts again (loop_wait.c runs the states); a fair, read or write, or spin handle's calls
 * go to loop_fair.c, loop_rw.c or loop_spin.c.
 * docs/internals/event-loop.md describes the states.
 */
#ifndef RLK_LOOP_LOCK_H
#define RLK_LOOP_LOCK_H

#include "loop_client.h"
#include "loop_lock_wait.h"

/* Gives back a reentrant or spin grant the replicas did not all acknowledge (loop_lock_wait.c):
 * lock_release.lua with no WAIT, its reply to fn(op, ...). */
int rlk_loop_reentrant_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn);

#endif
