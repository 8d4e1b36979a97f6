/*
 * Pushed messages and replies on the subscriber's connections (pubsub_dispatch.c), private to
 * the subscriber's files.
 */
#ifndef RLK_PUBSUB_DISPATCH_H
#define RLK_PUBSUB_DISPATCH_H

#include "pubsub_impl.h"

/* Handles one reply read from node's connection (pubsub_dispatch.c). Mutex held. */
void rlk_on_reply(rlk_pubsub *ps, rlk_ps_node *node, redisReply *r);

#endif
