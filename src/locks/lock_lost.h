/*
 * Per-hold loss callbacks on a handle (lock_lost.c).
 */
#ifndef RLK_LOCK_LOST_H
#define RLK_LOCK_LOST_H

#include "lock.h"

/* Per-hold loss callbacks (lock_lost.c). set: registers fn for (l, tid), replacing the one of a
 * re-entry (group: the multi-lock whose callback a member's loss fires). drop_locked: forgets
 * those of tid (the hold is gone; called with l->mu held); drop_group: the forwarding entries of
 * group on member l (the group handle is being freed); fire: takes the entries of tid out and calls
 * them (once: the watchdog thread, on a loss); free_all: forgets every entry (handle freed, fork
 * child). */
int rlk_hold_cb_set(rlock *l, uint64_t tid, void (*fn)(rlock *, void *), void *ud, rlock *group);
void rlk_hold_cb_drop_locked(rlock *l, uint64_t tid); /* l->mu held */
void rlk_hold_cb_drop_group(rlock *l, rlock *group);
/* The group handle is being freed: drop_group on member, and on a loop client the loss
 * forwarding its hold records keep for group (rlock_client.loop_group_gone). */
void rlk_hold_cb_group_gone(rlock *member, rlock *group);
void rlk_hold_cb_fire(rlock *l, uint64_t tid);
/* Takes tid's own entry (not a forwarding one) out of l: 1 with its fn and ud, 0 when there is
 * none (a loop group's loss, fired once, loop_group.c). drop: forgets tid's entries (a loop
 * group's release). */
int rlk_hold_cb_take_own(rlock *l, uint64_t tid, void (**fn)(rlock *, void *), void **ud);
void rlk_hold_cb_drop(rlock *l, uint64_t tid);
void rlk_hold_cb_free_all(rlock *l);

#endif
