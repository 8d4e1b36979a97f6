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

/* The client's state from opts (NULL: the defaults), checked, with its URL parsed and its
 * identity, but nothing started: rlock_client_new() starts the pool, the subscriber and the
 * watchdog on it, a loop client (src/loop) its own parts. rlk_client_discard() frees one that
 * never started. */
int rlk_client_alloc(const rlock_options *opts, rlock_client **out);
void rlk_client_discard(rlock_client *c);

#endif
