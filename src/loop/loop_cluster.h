/*
 * A loop client on a Redis Cluster (redis-cluster:// URLs): the slot map read on the loop from
 * the seeds in turn and the pub/sub mode decided (PUBSUB SHARDNUMSUB in auto), one data
 * connection per master, requests routed by their key's slot and queued until the first map
 * and the mode are known, MOVED and ASK followed (loop_cluster.c).
 */
#ifndef RLK_LOOP_CLUSTER_H
#define RLK_LOOP_CLUSTER_H

#include "loop_client.h"
#include "loop_sentinel.h"

/* Makes lc's cluster state and starts reading the map from the URL's seeds. RLOCK_OK and *out;
 * RLOCK_ECONN when no seed could be dialled at all (each refused at once: the message names
 * each one's failure); RLOCK_ENOMEM. moved is called when the first map is known (the pub/sub
 * connection, parked until then, is aimed at the home node) or when a read found none. */
int rlk_loop_cluster_new(rlk_loop_client *lc, rlk_loop_moved_fn moved, rlk_loop_cluster **out);
/* Fails what is queued or in flight with err and frees the state. */
void rlk_loop_cluster_free(rlk_loop_cluster *cl, int err);
/* Writes what each node's connection has queued (the client is being freed). */
void rlk_loop_cluster_flush(rlk_loop_cluster *cl);
/* The home node (the first master of the map: requests without a key, classic pub/sub) into
 * host (RLK_HOST_MAX bytes) and *port: RLOCK_OK, or RLOCK_ECONN while no map is known. */
int rlk_loop_cluster_home(const rlk_loop_cluster *cl, char *host, int *port);

/* Sends request bytes to the master of slot (-1: the home node), or queues them until the
 * first map is read (a read that finds none fails them with RLOCK_ECONN). fn NULL: no reply
 * is read (a last request at the free). RLOCK_OK, or the error of a send that failed now. */
int rlk_loop_cluster_send(rlk_loop_cluster *cl, int slot, const char *cmd, size_t len,
                          rlk_lconn_reply_fn fn, void *arg);
/* The same for an EVALSHA request of script: queued before the pub/sub mode is known, it is
 * sent with the SHA of the script's sharded variant when the mode is sharded. */
int rlk_loop_cluster_send_script(rlk_loop_cluster *cl, int slot, int script, const char *cmd,
                                 size_t len, rlk_lconn_reply_fn fn, void *arg);
/* The same for a command given as arguments, whose MOVED and ASK replies are followed as
 * rlk_loop_cluster_redirect() says (at most 5 times). */
int rlk_loop_cluster_command(rlk_loop_cluster *cl, int slot, int argc, const char **argv,
                             const size_t *lens, rlk_lconn_reply_fn fn, void *arg);
/* When rep is a MOVED or ASK error for the request (cmd, len) of slot: a MOVED records the new
 * owner, refreshes the map and resends there; an ASK sends ASKING and the request to the node
 * named, the map unchanged, after SCRIPT LOAD of script (the request's script, -1 for a plain
 * command: a NOSCRIPT reload routed by the slot would miss that node). 1: resent (fn gets its
 * reply), 0: not a redirection, or the error of a resend that failed now. */
int rlk_loop_cluster_redirect(rlk_loop_cluster *cl, const redisReply *rep, int slot, int script,
                              const char *cmd, size_t len, rlk_lconn_reply_fn fn, void *arg);
/* A sharded subscription's MOVED or ASK error (a pushed error on a pub/sub connection): a
 * MOVED records the slot's new owner (the shard channels follow: rlk_loop_shards_check()), an
 * ASK reads the map again. The slot, or -1 when rep is no redirection. */
int rlk_loop_cluster_redirected(rlk_loop_cluster *cl, const redisReply *rep);
/* Reads the map again now (a sharded channel dropped by its node: the slot moved). */
void rlk_loop_cluster_refresh(rlk_loop_cluster *cl);
/* The address of the master of slot in the map known (RLK_HOST_MAX bytes at host):
 * RLOCK_OK, or RLOCK_ECONN while no map is known. */
int rlk_loop_cluster_owner(rlk_loop_cluster *cl, int slot, char *host, int *port);
/* The replica count of the master that serves slot (each master's own, read by loop_sync.c),
 * NULL while no map is known. */
rlk_replicas *rlk_loop_cluster_replicas(rlk_loop_cluster *cl, int slot);
/* The connection to the master of slot as it is, NULL when there is none (nothing is dialled:
 * a WAIT counts the writes of the connection it is sent on). */
rlk_lconn *rlk_loop_cluster_conn(rlk_loop_cluster *cl, int slot);
/* 1 when some node's connection can take a request now (a last request at the free). */
int rlk_loop_cluster_ok(const rlk_loop_cluster *cl);

#endif
