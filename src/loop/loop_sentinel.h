/*
 * A loop client on a Sentinel deployment (redis-sentinel:// URLs): the master asked of each
 * Sentinel in turn and confirmed with ROLE, a +switch-master subscription on one Sentinel, and
 * the move of the client's connections when the master changes (loop_sentinel.c).
 */
#ifndef RLK_LOOP_SENTINEL_H
#define RLK_LOOP_SENTINEL_H

#include "loop_client.h"

/* How the state moves lc's connections to the master it found (err RLOCK_OK), or tells them
 * that none was found (err < 0): loop_client.c's rlk_loop_moved(), passed in so that this file
 * does not call back into loop_client.c. */
typedef void (*rlk_loop_moved_fn)(rlk_loop_client *lc, int err);

/* Makes lc's Sentinel state and starts its +switch-master subscription (on the loop: nothing is
 * dialled inside the call). RLOCK_OK and *out, or RLOCK_ENOMEM. */
int rlk_loop_sentinel_new(rlk_loop_client *lc, rlk_loop_moved_fn moved, rlk_loop_sentinel **out);
/* Ends every exchange with the Sentinels and frees the state (later, when one of its own
 * callbacks is running). */
void rlk_loop_sentinel_free(rlk_loop_sentinel *s);
/* The master is not known yet and a request needs it: starts asking the Sentinels (at the next
 * turn of the loop) unless that is under way. RLOCK_OK; RLOCK_ECONN when the last round found
 * no master less than RLK_SENTINEL_RECHECK_MS ago. */
int rlk_loop_sentinel_need(rlk_loop_sentinel *s);
/* A sign that the master moved (a broken data connection, a READONLY reply): asks the Sentinels
 * again, at most every RLK_SENTINEL_RECHECK_MS. */
void rlk_loop_sentinel_recheck(rlk_loop_sentinel *s);

#endif
