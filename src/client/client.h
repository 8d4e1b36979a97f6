/*
 * The client layer: what client.c offers the layers above (reference counting, owner strings);
 * client_version.h and client_fork.h declare the other files' functions. The client's state is
 * defined in context.h, which the layers below read instead of this header.
 */
#ifndef RLK_CLIENT_H
#define RLK_CLIENT_H

#include "context.h"

/* Writes "<uuid>:<thread-id>" of the calling thread into buf (RLK_OWNER_MAX bytes) and returns
 * its length. */
size_t rlk_owner(const rlock_client *c, uint64_t tid, char *buf);

/* Reference counting: a handle keeps its client's memory alive after rlock_client_free(). */
void rlk_client_ref(rlock_client *c);
void rlk_client_unref(rlock_client *c);

#endif
