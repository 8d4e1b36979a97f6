/*
 * Sentinel deployments (redis-sentinel:// URLs): finding the current master by asking the
 * Sentinels in turn, and confirming with ROLE that the node they name is a master.
 */
#ifndef RLK_SENTINEL_H
#define RLK_SENTINEL_H

#include "context.h"

/* Asks each Sentinel of the client's URL in turn for the master (SENTINEL
 * get-master-addr-by-name), dials the node it names and checks ROLE; the first master found is
 * recorded as the client's data node. A Sentinel that is down, does not know the master or
 * answers nonsense, and a named node that is down or not a master, are skipped. Bounded by
 * deadline_ms (monotonic). RLOCK_OK; RLOCK_ECONN naming every Sentinel and what went wrong
 * with it; RLOCK_EAUTH when the master refused the data nodes' credentials; RLOCK_ENOMEM. */
int rlk_sentinel_discover(rlock_client *c, int64_t deadline_ms);

/* How often at most a failover recheck asks the Sentinels. */
#define RLK_SENTINEL_RECHECK_MS 200

/* Called on signs that the master moved (a lost connection, READONLY, LOADING): asks the
 * Sentinels again (at most every RLK_SENTINEL_RECHECK_MS, one thread at a time) and, when they
 * name a new master, moves the pool there. A no-op for other deployments. */
void rlk_sentinel_recheck(rlock_client *c);

/* A Sentinel announced (+switch-master) that the master is now host:port: checks with ROLE that
 * it is a master and moves the client there as a recheck does (rlk_sentinel_recheck's switch:
 * the pool's generation, the replica count, the master generation the subscriber follows). A
 * no-op when host:port is already the master. RLOCK_OK (moved, or nothing to do), or the error
 * of the ROLE check (unreachable, not a master): then nothing moved. */
int rlk_sentinel_switch_to(rlock_client *c, const char *host, int port);

/* The subscriber thread's subscription to +switch-master on one Sentinel (sentinel_watch.c).
 * Thread only: the subscriber thread owns it as it owns its data connection. */
typedef struct rlk_sentinel_watch {
    struct rlk_conn *conn; /* subscribed to +switch-master, NULL while not */
    size_t next;           /* the URL's Sentinel dialled next */
    int64_t retry_at;      /* monotonic ms before which no dial is tried (after a failed one) */
    int dropped;           /* a subscription was lost: a switch may have been missed */
    char pending_host[RLK_HOST_MAX]; /* an announced master not confirmed yet ("": none) */
    int pending_port;
    int64_t pending_until;    /* monotonic ms after which it is left to the recheck on errors */
    int64_t pending_retry_at; /* monotonic ms of its next ROLE check */
} rlk_sentinel_watch;

/* The socket to poll for the subscription, dialling a Sentinel (the next one in the URL after a
 * failure) when none is subscribed and a dial is due; -1 when there is none (not a Sentinel
 * deployment, or every dial failed lately). Also tries again to move to an announced master whose
 * ROLE check failed (it may still be finishing its promotion, or the dial timed out). */
int rlk_sentinel_watch_fd(rlock_client *c, rlk_sentinel_watch *w);
/* Reads what arrived on the subscription; a +switch-master for the client's master name moves
 * the client (rlk_sentinel_switch_to). A lost connection is closed, and the next Sentinel is
 * dialled at the next rlk_sentinel_watch_fd(). */
void rlk_sentinel_watch_read(rlock_client *c, rlk_sentinel_watch *w);
/* Closes the subscription (the subscriber stops). */
void rlk_sentinel_watch_close(rlk_sentinel_watch *w);
/* Frees it in the child of a fork() without writing anything (rlk_conn_abandon). */
void rlk_sentinel_watch_abandon(rlk_sentinel_watch *w);
#endif
