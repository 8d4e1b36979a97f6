/*
 * Queries on the lock hash (lock_query.c); the generic ones are declared in lock.h.
 */
#ifndef RLK_LOCK_QUERY_H
#define RLK_LOCK_QUERY_H

#include "lock.h"

/* The hold count of a's field on Redis (HGET: 0 when the field or the key is gone), or a
 * negative error. */
int rlk_field_count(rlk_acq *a);
/* The count a settle of an unknown outcome reads (lock_release.c): rlk_field_count(); for a
 * client that syncs to replicas, read with the replicas' WAIT behind, and *trusted = 0 (the last
 * error says why) when fewer acknowledged than the node is counted to have: such a node may have
 * lost its data without knowing yet that it was replaced, so a count it gives may be too low. */
int rlk_field_count_settle(rlk_acq *a, int *trusted);
/* *v from an integer reply; RLOCK_EPROTO naming what otherwise. */
int rlk_reply_int(const redisReply *r, long long *v, const char *what);

#endif
