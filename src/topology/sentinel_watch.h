/*
 * The subscriber thread's watch of the Sentinels' +switch-master announcements
 * (sentinel_watch.c).
 */
#ifndef RLK_SENTINEL_WATCH_H
#define RLK_SENTINEL_WATCH_H

#include <hiredis.h>

#include "context.h"

struct rlk_conn;

/* The subscriber thread's subscription to +switch-master on one Sentinel.
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
/* The new master of a +switch-master message (the pushed array "message", channel,
 * "<name> <old-ip> <old-port> <new-ip> <new-port>") into host (RLK_HOST_MAX bytes) and *port
 * when it names master_name: 1, else 0. Pure: the loop client's watch parses with it too. */
int rlk_sentinel_parse_switch(const char *master_name, const redisReply *m, char *host, int *port);
/* Closes the subscription (the subscriber stops). */
void rlk_sentinel_watch_close(rlk_sentinel_watch *w);
/* Frees it in the child of a fork() without writing anything (rlk_conn_abandon). */
void rlk_sentinel_watch_abandon(rlk_sentinel_watch *w);

#endif
