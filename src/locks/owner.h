/*
 * What owner.c offers the layer above (src/loop): an owner's number on its client, for calls
 * that run as the owner without a thread of their own.
 */
#ifndef RLK_OWNER_H
#define RLK_OWNER_H

#include "client.h"

/* The number of owner (not NULL), an owner of client c, into *tid: RLOCK_OK, or RLOCK_EINVAL
 * naming what for a NULL owner or an owner of another client. */
int rlk_owner_tid(const rlock_owner *owner, const rlock_client *c, const char *what, uint64_t *tid);

#endif
