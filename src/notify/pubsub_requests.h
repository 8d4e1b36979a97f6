/*
 * SUBSCRIBE/UNSUBSCRIBE requests awaiting their replies (pubsub_requests.c), private to the
 * subscriber's files.
 */
#ifndef RLK_PUBSUB_REQUESTS_H
#define RLK_PUBSUB_REQUESTS_H

#include "pubsub_impl.h"

/* Requests awaiting their reply on node's connection (pubsub_requests.c), thread only. */
int rlk_req_push(rlk_ps_node *node, rlk_sub *s, int subscribe);
rlk_ps_req *rlk_req_pop(rlk_ps_node *node);
/* The oldest request awaiting its reply, or NULL. */
rlk_ps_req *rlk_req_head(rlk_ps_node *node);
void rlk_req_clear(rlk_ps_node *node);
/* An error reply on node's connection: Redis refused the oldest request. */
void rlk_on_refused(rlk_pubsub *ps, rlk_ps_node *node, const redisReply *r);
/* Fails the waiters of SUBSCRIBEs unconfirmed for subscription_timeout_ms; returns the ms until
 * the next one is due (INT64_MAX: none). */
int64_t rlk_check_confirmations(rlk_pubsub *ps, int64_t now);

#endif
