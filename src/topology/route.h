/*
 * Sending a command to the node it belongs to (route.c): every Redis command of the library goes
 * through rlk_cmd(), rlk_pool_run(), rlk_pool_run_slot() (scripts.c's rlk_script()) or, for
 * pipelines, a borrowed rlk_conn.
 */
#ifndef RLK_ROUTE_H
#define RLK_ROUTE_H

#include "pool.h"

/* Runs fn on a pooled connection. With RLK_IDEMPOTENT, a connection failure that proves the
 * request never reached Redis (rlk_conn_resendable()) is retried once on a fresh connection.
 * On success *out is the reply (the caller freeReplyObject()s it); a Redis error reply is not a
 * failure here. Returns RLOCK_OK or RLOCK_ECLOSED / RLOCK_ECONN / RLOCK_EAUTH / RLOCK_ENOMEM,
 * or fn's own error, with the last error set. */
int rlk_pool_run(rlock_client *c, int flags, rlk_exchange_fn fn, void *arg, redisReply **out);

/* rlk_pool_run() for a request whose keys live in slot (0..16383; -1 = no key): on a cluster
 * client it goes to the slot's master, redirections followed (cluster_route.c); elsewhere it is
 * rlk_pool_run(). */
int rlk_pool_run_slot(rlock_client *c, int slot, int flags, rlk_exchange_fn fn, void *arg,
                      redisReply **out);
/* Runs one command (rlk_pool_run() of a plain send-and-read); on a cluster client it goes to
 * the slot of argv[1], the key of every command the library sends this way. */
int rlk_cmd(rlock_client *c, int flags, const rlk_args *argv, redisReply **out);

#endif
