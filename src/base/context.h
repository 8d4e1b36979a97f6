/*
 * The client's context: what every layer reads of the client it serves (options, URL, identity,
 * TLS settings, the current master, replica counts, generation counters), and the few questions
 * it asks of it. The parts that upper layers create (pool, cluster, subscriber, watchdog) are
 * opaque pointers here; client/ creates and frees them.
 */
#ifndef RLK_CONTEXT_H
#define RLK_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>

#include "observe.h"
#include "url.h"
#include "util.h"

typedef struct rlk_pool rlk_pool;

/* Longest host name a Sentinel may name (DNS name or IPv6 text), with its NUL. */
#define RLK_HOST_MAX 256
typedef struct rlk_pubsub rlk_pubsub;
typedef struct rlk_watchdog rlk_watchdog;
typedef struct rlk_tls rlk_tls;
typedef struct rlk_cluster rlk_cluster;
/* A master's replica count as replica.c keeps it: the client's master's in rlock_client, and each
 * cluster node's in that node's pool (pool.c), which the pool's connections point at
 * (rlk_conn.replicas), so that a synced exchange waits for the replicas of the node it ran on. */
typedef struct rlk_replicas {
    atomic_int n;           /* replicas online */
    atomic_llong due;       /* monotonic ms of the next refresh */
    atomic_llong low_since; /* since when fewer replicas are online (0: not) */
    /* 0: never read, 1: current, 2: the node left the cluster's masters (its count is kept
     * for the master that takes over its slots); a cluster node's first synced exchange
     * reads it when not 1. */
    atomic_int known;
} rlk_replicas;

/* Longest owner string: 36-char UUID, ':', 20-digit thread id, ":write", NUL. */
#define RLK_OWNER_MAX 64

struct rlock_client {
    rlock_options opts; /* copy of the caller's options; opts.url points at url_copy */
    char *url_copy;
    char *tls_copies[4]; /* opts.tls_ca_file .. tls_server_name point at these copies */
    rlk_tls *tls;        /* the TLS context every connection uses, NULL when not configured */
    rlk_url url;         /* parsed URL */
    char uuid[37];       /* client id, lower-case text form */
    /* The data node's pool; on a cluster, the home node's (cluster.h). */
    rlk_pool *pool;
    /* A cluster client's slot map and node pools, else NULL (route.c sends by slot then). */
    rlk_cluster *cluster;
    /* 1: sharded pub/sub (a cluster client, rlock_options.cluster_pubsub): scripts publish with
     * SPUBLISH and the subscriber listens with SSUBSCRIBE on each channel's master. Set before
     * the subscriber starts, read-only afterwards. */
    int sharded;
    rlk_pubsub *pubsub;
    rlk_watchdog *watchdog;
    /* A loop client's state (src/loop/loop_client.h), NULL for a threaded client; loop_stop
     * frees it when the client is freed (client/ calls it without knowing the layer above). */
    void *loop;
    void (*loop_stop)(rlock_client *c);
    /* A loop client's hold records answer rlock_token_ex() (src/loop/loop_watchdog.c): the token
     * of owner tid's hold through lock, 0 with none. NULL for a threaded client. */
    uint64_t (*loop_token)(rlock *lock, uint64_t tid);
    /* Set by a loop group that forwards a member's loss on this loop client (loop_group.c):
     * called for each member when the group handle is freed, so that no hold record names it
     * any more. NULL until then. */
    void (*loop_group_gone)(rlock *member, const rlock *group);
    char *sentinel_user; /* copies of the options (NULL = none) */
    char *sentinel_password;
    pthread_mutex_t master_mu;      /* guards master_host and master_port */
    char master_host[RLK_HOST_MAX]; /* Sentinel: the current master ("" before discovery) */
    int master_port;
    /* Raised by every rlk_client_set_master(): a connection dialled under an older value goes to
     * a node that is no longer the master (the subscriber compares it with its own). */
    atomic_uint master_gen;
    atomic_llong recheck_at;     /* monotonic ms before which no failover recheck runs */
    rlk_replicas replicas;       /* the master's replicas (replica.c) */
    atomic_int replicas_unknown; /* 1: the user may not run INFO, so replicas are not counted */
    atomic_int closed;           /* set by rlock_client_free(); handles then return RLOCK_ECLOSED */
    atomic_int refs;             /* 1 for the client itself + 1 per open handle */
    atomic_int warned_nopublish; /* 1 once a refused PUBLISH was logged (release_reply.c) */
    /* The fork generation (rlk_fork_gen()) the client's identity, connections and threads
     * belong to; a child of fork() sees a newer one and refreshes the client (client_fork.c). */
    atomic_uint gen;
    struct rlock_client *fork_prev, *fork_next; /* the list of live clients (client_fork.c) */
    /* The figures and the event hook (observe.h): every layer reports through rlk_obs_*(). */
    rlk_obs obs;
};

/* RLOCK_EINVAL, naming what, on a loop client (a blocking call there would block its loop),
 * else RLOCK_OK. */
int rlk_client_blocking(const rlock_client *c, const char *what);

/* Sends a formatted message to the user's log_fn if level is enabled. */
void rlk_log(const rlock_client *c, int level, const char *fmt, ...) RLK_PRINTF(3, 4);

/* RLOCK_ECLOSED (with a message) if the client was freed, else RLOCK_OK. Also RLOCK_ECLOSED for
 * a client inherited across fork() that no entry point refreshed yet (rlk_client_enter()): a
 * safety net, so that an internal path can never talk on the parent's connections. */
int rlk_client_check(const rlock_client *c);

/* On a cluster client a script's keys and channels must share one slot, and rlock derives them
 * from the name (Redisson's prefix:name and name:suffix; a latch's channel wraps the name in
 * braces): RLOCK_EINVAL, naming the name and the rule, for a name whose derived names would hash
 * to another slot than the name. what: "lock", "semaphore" or "latch". RLOCK_OK elsewhere. */
int rlk_check_cluster_name(const rlock_client *c, const char *name, const char *what);
/* Records the master a Sentinel named (Sentinel deployments) and raises master_gen. */
void rlk_client_set_master(rlock_client *c, const char *host, int port);

/* Copies the current master (Sentinel: the one discovered last; Cluster: the home node) into host
 * (RLK_HOST_MAX bytes) and *port, under the client's master mutex. */
void rlk_client_master(const rlock_client *c, char *host, int *port);

/* ---- fork() generation (the counter lives in context.c, the handlers in client_fork.c) ------
 * The process' fork generation: 0 in a process that never forked, raised by one in the child of
 * every fork() (a pthread_atfork child handler). An object that keeps per-process state (a
 * client's identity, connections and threads; a handle's hold records; a semaphore's leased
 * permits) records the generation it belongs to and, when a call finds it stale, forgets what
 * belonged to the parent, under rlk_fork_lock(). One relaxed load: the hot path stays cheap. */
extern atomic_uint rlk_fork_generation;
static inline unsigned rlk_fork_gen(void)
{
    return atomic_load_explicit(&rlk_fork_generation, memory_order_relaxed);
}
/* 1 if the object whose generation is *gen was inherited from a parent process. */
static inline int rlk_fork_stale(atomic_uint *gen)
{
    return atomic_load_explicit(gen, memory_order_acquire) != rlk_fork_gen();
}

#endif
