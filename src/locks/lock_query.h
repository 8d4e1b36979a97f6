/*
 * Queries on the lock hash (lock_query.c); the generic ones are declared in lock.h.
 */
#ifndef RLK_LOCK_QUERY_H
#define RLK_LOCK_QUERY_H

#include "lock.h"

/* The hold count of a's field on Redis (HGET: 0 when the field or the key is gone), or a
 * negative error. */
int rlk_field_count(rlk_acq *a);
/* *v from an integer reply; RLOCK_EPROTO naming what otherwise. */
int rlk_reply_int(const redisReply *r, long long *v, const char *what);

#endif
