/*
 * Sharded pub/sub on a loop cluster client (loop_shard.c): a pub/sub connection per master,
 * each channel subscribed with SSUBSCRIBE on the master of its slot, and moved with its slot
 * (the server dropped it, a MOVED, a map read).
 */
#ifndef RLK_LOOP_SHARD_H
#define RLK_LOOP_SHARD_H

#include "loop_client.h"

/* The connection of shard sh as it is (NULL for a NULL sh, or while it is not dialled). */
rlk_lconn *rlk_loop_shard_conn(const rlk_loop_shard *sh);
/* SSUBSCRIBEs ch on the master of its slot (dialled when needed), its counts started again;
 * with no map yet it waits for it (rlk_loop_moved() subscribes then). RLOCK_OK or an error. */
int rlk_loop_shard_subscribe(rlk_loop_client *lc, rlk_loop_chan *ch);
/* Subscribes every wanted channel that is subscribed nowhere: the first error, or RLOCK_OK. */
int rlk_loop_shards_ensure(rlk_loop_client *lc);
/* The server dropped ch's subscription unasked (its slot moved away): subscribed again on the
 * owner the map names, the map read again (a node that no longer serves the slot answers
 * MOVED, which names the owner). */
void rlk_loop_shard_dropped(rlk_loop_client *lc, rlk_loop_chan *ch);
/* The cluster map changed (a MOVED, a map read): each channel subscribed on a master that no
 * longer serves its slot is subscribed on the new one; its waiters attempt once after the new
 * confirmation (RLK_LOOP_SUBSCRIBED). Nothing in classic pub/sub. */
void rlk_loop_shards_check(rlk_loop_client *lc);
/* Closes every shard's connection and frees the records (the client is being freed). */
void rlk_loop_shards_free(rlk_loop_client *lc);

#endif
