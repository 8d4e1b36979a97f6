/*
 * The fair lock's constructor and its script calls (lock_fair.c), which the loop client's fair
 * waiter (src/loop/loop_fair.c) sends too.
 */
#ifndef RLK_LOCK_FAIR_H
#define RLK_LOCK_FAIR_H

#include "lock.h"

rlock *rlk_fair_open(rlock_client *c, const char *name);

/* fair_acquire.lua's KEYS and ARGV for a (a->lease_ms, a->may_queue, a->wait_id): grant_ttl is
 * the direct grant a release may make to this waiter (0: none, it is woken by "0" as a Redisson
 * waiter is); waiting: the caller waits already, so its own field in the hash means granted. */
void rlk_fair_attempt_args(rlk_acq *a, int64_t grant_ttl, int waiting, rlk_args *keys,
                           rlk_args *args);
/* Decodes fair_acquire's reply: 1 acquired (a->token set), 0 busy (a->ttl_ms = the wait bound,
 * *joined = 1 if the caller was queued just now), or a negative error. */
int rlk_fair_attempt_reply(rlk_acq *a, const redisReply *r, int *joined);
/* fair_leave.lua's KEYS and ARGV for a->owner; grants: with the fencing counter and grant hash,
 * so that a grant made before the leave is reported ({2, token}). */
void rlk_fair_leave_args(rlk_acq *a, int grants, rlk_args *keys, rlk_args *args);
/* fair_release.lua's KEYS and ARGV for one hold of a->owner (a->lease_ms kept for the holds
 * left), with the grant keys when the client makes direct grants (rlk_grants_on). */
void rlk_fair_release_args(rlk_acq *a, rlk_args *keys, rlk_args *args);

#endif
