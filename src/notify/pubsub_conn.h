/*
 * The subscriber's life (pubsub_conn.c): creation with its thread and connections, free, the
 * child's abandon after fork(), and its connection state.
 */
#ifndef RLK_PUBSUB_CONN_H
#define RLK_PUBSUB_CONN_H

#include "context.h"

int rlk_pubsub_new(rlock_client *c, rlk_pubsub **out);
void rlk_pubsub_free(rlk_pubsub *ps);
/* In a child of fork(): frees the inherited subscriber without joining its thread (which does
 * not exist here) and abandons its connection (nothing is written). */
void rlk_pubsub_abandon(rlk_pubsub *ps);

/* 1 if the subscriber has a connection to every node it uses (for tests). */
int rlk_pubsub_connected(rlk_pubsub *ps);

#endif
