/*
 * Replica-synced writes (Redisson's checkLockSyncedSlaves): WAIT (or WAITAOF) pipelined behind a
 * script that grants, re-enters, renews or releases, for the replicas the master has online,
 * counted from INFO replication (rises at once, falls only after RLK_REPLICA_SHRINK_MS, so a
 * failover fails closed with RLOCK_EREPLICA). docs/internals/connections.md explains why.
 */
#ifndef RLK_REPLICA_H
#define RLK_REPLICA_H

#include "context.h"
#include "conn.h"

/* How often the replica count is refreshed while synced scripts run. */
#define RLK_REPLICA_REFRESH_MS 1000
/* How long fewer replicas must be online before the client waits for fewer. */
#define RLK_REPLICA_SHRINK_MS 10000

/* Reads the master's replicas and version on conn when the client starts. With
 * replica_sync_aof on a server older than 7.2: RLOCK_ENOTSUP. RLOCK_OK or an error. */
int rlk_replica_init(rlock_client *c, rlk_conn *conn);
/* Reads the replicas of a new master (a Sentinel failover) on conn; a lower count than before
 * takes RLK_REPLICA_SHRINK_MS to count, as for any refresh. */
int rlk_replica_refresh(rlock_client *c, rlk_conn *conn);

/* Marks a cluster node's count stale (it left the map's masters): it is read again when the
 * node serves slots again, and kept meanwhile for the master that takes its slots over
 * (rlk_replica_inherit). NULL is fine. */
void rlk_replica_forget(rlk_replicas *st);

/* A cluster master that took over its slots from another (a failover) starts from that one's
 * count, unless its own is known: a lower count of its own then counts only after
 * RLK_REPLICA_SHRINK_MS, as after a Sentinel failover. NULLs are fine. */
void rlk_replica_inherit(rlk_replicas *to, const rlk_replicas *from);

/* What a synced exchange appends behind its script: WAIT for n replicas (none when n is 0) and
 * INFO replication when refresh is set. */
typedef struct rlk_sync {
    rlk_replicas *node; /* the count of the node the exchange runs on (set by rlk_sync_plan) */
    int n;              /* replicas to wait for */
    int refresh;        /* 1: INFO replication follows */
    int acked;          /* out of rlk_sync_read(): replicas that acknowledged */
} rlk_sync;

/* Decides what to append for the next synced exchange on conn, with the replica count of the
 * node conn is on (claims the refresh when one is due). A cluster node's count is read on conn
 * first (INFO replication) when nothing is known of it yet. RLOCK_OK or conn's error. */
int rlk_sync_plan(rlock_client *c, rlk_conn *conn, rlk_sync *s);
/* rlk_sync_plan() for a count already known (st), with no connection: a loop client's, which
 * reads INFO replication on its loop (src/loop/loop_sync.c). */
void rlk_sync_plan_known(rlock_client *c, rlk_replicas *st, rlk_sync *s);
/* Sets st from an INFO replication text read when nothing was known of it (taken as it is). */
void rlk_replica_learn_info(rlk_replicas *st, const char *info);
/* rlk_sync_read() for replies read elsewhere: wait is the WAIT reply (NULL: none was sent, or
 * its reply is lost: then pass an error reply or set acked after), info the INFO reply or NULL;
 * a lower count counts only after RLK_REPLICA_SHRINK_MS. */
void rlk_sync_took(rlk_sync *s, const redisReply *wait, const redisReply *info);
/* Appends to the request cmd/len (malloc()ed, grown here) what a synced exchange sends behind
 * it, for a request formatted in advance and sent later (an armed attempt, lock_wait.c): WAIT for
 * the replicas counted now, or WAITAOF; no INFO refresh. Fills s for rlk_sync_read(). Returns
 * the number of requests appended (0 or 1), or RLOCK_ENOMEM with cmd left as it was. */
int rlk_sync_format(rlock_client *c, rlk_sync *s, char **cmd, size_t *len);
/* Replicas a synced exchange would wait for now, without claiming a refresh (0: none). */
int rlk_sync_target(const rlock_client *c);
/* Appends WAIT/WAITAOF and INFO as planned. */
int rlk_sync_append(const rlock_client *c, rlk_conn *conn, const rlk_sync *s);
/* Reads what rlk_sync_append() queued, after the script's reply; sets s->acked and refreshes
 * the replica count. RLOCK_OK (also for a WAIT error reply, counted as no acknowledgement), or
 * the connection's error. */
int rlk_sync_read(rlock_client *c, rlk_conn *conn, rlk_sync *s);

/* The calling thread's outcome of its last synced script: 1 when fewer replicas than asked
 * acknowledged (then *acked and *n say how many), else 0. The lock layer reads it after a grant
 * to undo a grant that is not on the replicas; rlk_sync_clear() forgets it. */
int rlk_sync_short(int *acked, int *n);
void rlk_sync_clear(void);
/* Called by scripts.c after each synced script. */
void rlk_sync_note(const rlk_sync *s);
/* While set on this thread, synced scripts send no WAIT: the undo of a grant that did not reach
 * the replicas must not wait for them a second time. */
void rlk_sync_suppress(int on);

/* RLOCK_EREPLICA with "k of n replicas acknowledged" and what. */
int rlk_sync_error(int acked, int n, const char *what, const char *name);

#endif
