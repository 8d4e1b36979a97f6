/*
 * rlock - distributed locks on Redis, compatible with Redisson's lock data.
 *
 * This is the whole public API. Everything not declared here is private and may change.
 *
 * Objects
 *   rlock_client  One per Redis deployment, long-lived, thread-safe. It owns a connection pool,
 *                 the Lua script registry, one pub/sub subscriber connection and one watchdog
 *                 thread that renews leases. Create few of them; share one across threads.
 *                 A loop client (rlock_async.h) is driven by the caller's event loop instead
 *                 and starts no thread; the blocking calls below refuse it with RLOCK_EINVAL.
 *   rlock         One lock handle. Every lock type (reentrant, fair, read, write, multi, RedLock)
 *                 is an rlock with the same operations, so a program can pick the type per
 *                 resource. A handle may be used by many threads at once.
 *
 * Ownership of a hold
 *   A hold belongs to (client, thread), exactly as in Redisson: the owner written to Redis is
 *   "<client-uuid>:<thread-id>", where thread-id is a number given to each thread on its first
 *   call into rlock, unique within the process and never reused. A thread may re-enter a lock it
 *   holds (the hold count grows); another thread of the same process is a different owner.
 *
 * Errors
 *   Functions returning int return RLOCK_OK (0), a non-negative result where documented, or a
 *   negative RLOCK_E* code. rlock_strerror() names a code; rlock_last_error() gives the detail
 *   of the calling thread's most recent failure (including Redis' own error text when Redis
 *   caused it). No call prints, aborts or exits the process.
 *
 * Strings
 *   Every string passed in is copied; nothing is retained. Lock names are binary-safe in Redis
 *   but are passed here as NUL-terminated C strings.
 */
#ifndef RLOCK_H
#define RLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RLOCK_EXPORT __attribute__((visibility("default")))
#else
#define RLOCK_EXPORT
#endif

#define RLOCK_VERSION_MAJOR 0
#define RLOCK_VERSION_MINOR 1
#define RLOCK_VERSION_PATCH 0

/* The version as one number to compare against: 0xMMmmpp (major, minor, patch, a byte each), so
 * "#if RLOCK_VERSION_HEX >= 0x000200" asks for 0.2.0 or later of the header compiled against. */
#define RLOCK_VERSION_HEX                                                                          \
    ((RLOCK_VERSION_MAJOR << 16) | (RLOCK_VERSION_MINOR << 8) | RLOCK_VERSION_PATCH)

/* Returns the library's version as "MAJOR.MINOR.PATCH" (of the library actually linked). */
RLOCK_EXPORT const char *rlock_version_string(void);

/* Returns RLOCK_VERSION_HEX of the library actually linked, which may be newer than the header a
 * program was compiled with: compare it to check at run time for a feature or a fix. */
RLOCK_EXPORT unsigned long rlock_version(void);

/* ---------------------------------------------------------------------------------------------
 * Error codes. Every call returns RLOCK_OK, a documented non-negative result, or one of these
 * negative codes (functions return them as int). Codes are only ever appended; a value never
 * changes meaning. Each name is also a macro of itself, so "#ifdef RLOCK_EREPLICA" tells whether
 * the header compiled against knows a code.
 * ------------------------------------------------------------------------------------------- */
typedef enum rlock_error {
    RLOCK_OK = 0,
    RLOCK_ETIMEDOUT = -1, /* the lock was not acquired within the wait time */
    RLOCK_ENOTOWNER = -2, /* unlock of a lock the calling thread does not hold */
    RLOCK_ELOST = -3,     /* the hold's lease ran out (or the key vanished) while held */
    RLOCK_EINVAL = -4,    /* invalid argument: NULL/empty name, bad URL, bad duration ... */
    RLOCK_ENOMEM = -5,    /* out of memory */
    RLOCK_ECONN = -6,     /* Redis unreachable, connection lost, or a command timed out */
    RLOCK_EREDIS = -7,    /* Redis answered with an error reply (text in rlock_last_error) */
    RLOCK_ECLOSED = -8,   /* the client was freed: the handle can only be freed now */
    RLOCK_EDEADLK = -9,   /* the request can never succeed for this thread (read -> write) */
    RLOCK_ENOTSUP = -10,  /* the operation is not supported by this lock type */
    RLOCK_EPROTO = -11,   /* Redis replied with an unexpected type or shape */
    RLOCK_EAUTH = -12,    /* authentication or SELECT failed when connecting */
    /* TLS failed: handshake, untrusted certificate, name mismatch, client certificate refused
     * (OpenSSL's reason in rlock_last_error). */
    RLOCK_ETLS = -13,
    RLOCK_EREPLICA = -14,  /* fewer replicas than connected acknowledged a write in time */
    RLOCK_ECANCELED = -15, /* the wait was cancelled through an rlock_cancel */
} rlock_error;
#define RLOCK_OK        RLOCK_OK
#define RLOCK_ETIMEDOUT RLOCK_ETIMEDOUT
#define RLOCK_ENOTOWNER RLOCK_ENOTOWNER
#define RLOCK_ELOST     RLOCK_ELOST
#define RLOCK_EINVAL    RLOCK_EINVAL
#define RLOCK_ENOMEM    RLOCK_ENOMEM
#define RLOCK_ECONN     RLOCK_ECONN
#define RLOCK_EREDIS    RLOCK_EREDIS
#define RLOCK_ECLOSED   RLOCK_ECLOSED
#define RLOCK_EDEADLK   RLOCK_EDEADLK
#define RLOCK_ENOTSUP   RLOCK_ENOTSUP
#define RLOCK_EPROTO    RLOCK_EPROTO
#define RLOCK_EAUTH     RLOCK_EAUTH
#define RLOCK_ETLS      RLOCK_ETLS
#define RLOCK_EREPLICA  RLOCK_EREPLICA
#define RLOCK_ECANCELED RLOCK_ECANCELED

/* Returns a short constant description of code ("unknown error code" for unknown values). */
RLOCK_EXPORT const char *rlock_strerror(int code);

/* Returns the detail message of the calling thread's last failure. The text is valid until the
 * calling thread's next rlock call; "" when there has been none. Never NULL. */
RLOCK_EXPORT const char *rlock_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Options and client.
 * ------------------------------------------------------------------------------------------- */

/* Log levels passed to log_fn (as int); only messages at or below opts.log_level are delivered.
 * Each name is also a macro of itself, as the error codes are. */
typedef enum rlock_log_level {
    RLOCK_LOG_ERROR = 0, /* the most severe level */
    RLOCK_LOG_WARN = 1,  /* something degraded: a hold or permit lost, renewals failing (default) */
    RLOCK_LOG_INFO = 2,  /* a mode chosen or a fallback taken (e.g. PSUBSCRIBE refused) */
    RLOCK_LOG_DEBUG = 3  /* the most verbose level */
} rlock_log_level;
#define RLOCK_LOG_ERROR RLOCK_LOG_ERROR
#define RLOCK_LOG_WARN  RLOCK_LOG_WARN
#define RLOCK_LOG_INFO  RLOCK_LOG_INFO
#define RLOCK_LOG_DEBUG RLOCK_LOG_DEBUG

/* Durations larger than this (about 100 years) are rejected as leases and mean "forever" as
 * waits. The cap keeps every deadline computation free of overflow. */
#define RLOCK_MAX_DURATION_MS INT64_C(3153600000000)

/* Passing this as wait_ms to rlock_try_lock() waits without a time limit. */
#define RLOCK_WAIT_FOREVER INT64_MAX

typedef struct rlock_options {
    /* "redis://[[user]:password@]host[:port][/db]", "rediss://..." (the same over TLS, see
     * the tls_* options) or "unix:///path[?db=N]", or a Sentinel deployment:
     * "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#MASTER" (Sentinel
     * port default 26379; user and password are the data nodes'; "rediss-sentinel://" = TLS
     * everywhere). Default "redis://127.0.0.1:6379". User and password may be
     * percent-encoded. A Redis Cluster:
     * "redis-cluster://[[user]:password@]host[:port][,host[:port]...]" (seed nodes, port
     * default 6379; "rediss-cluster://" = TLS): the client reads the slot map from the seeds,
     * keeps a pool of pool_size connections per master and sends every call on a lock,
     * semaphore or latch to the master of its name's slot, following MOVED/ASK and failovers
     * (README "Deployments"). */
    const char *url;
    /* Connections in the pool, dialled on demand. Default 64 (Redisson's connectionPoolSize). */
    int pool_size;
    /* Bound on connecting (TCP connect, TLS handshake, AUTH and SELECT together).
     * Default 10000 (Redisson connectTimeout). */
    int64_t connect_timeout_ms;
    /* Bound on one command's reply, and on waiting for a free pooled connection.
     * Default 3000 (Redisson timeout). rlock_try_lock() returns within its wait_ms plus this. */
    int64_t command_timeout_ms;
    /* Lease of a hold taken with lease_ms < 0; the watchdog renews it every third of this.
     * Default 30000 (Redisson lockWatchdogTimeout). */
    int64_t watchdog_timeout_ms;
    /* Redisson's fairLockWaitTimeout (default 300000), kept for option parity only: rlock's fair
     * queue judges waiters by heartbeats (waiter_timeout_ms), not by this deadline. */
    int64_t fair_wait_ms;
    /* Fair lock and waiting writers: a waiter whose process stopped refreshing its liveness for
     * this long is removed from the queue. The watchdog refreshes every third of it.
     * Default 5000. Also the bound of a direct grant (reentrant and fair locks): a release may
     * grant the lock to a waiting rlock thread with a TTL of min(its lease, this), and the
     * waiter's client extends a longer lease (watchdog or explicit) a third of this later; a
     * waiter whose process died just before such a grant holds the lock at most this long. */
    int64_t waiter_timeout_ms;
    /* Bound on a SUBSCRIBE being confirmed once sent; a wait whose subscription is not confirmed
     * in time fails with RLOCK_ECONN. Default 7500 (Redisson subscriptionTimeout). */
    int64_t subscription_timeout_ms;
    /* RedLock: bound on each server's reply during acquire, small relative to the lease.
     * Default 50. Taken from the client of each member lock. */
    int64_t redlock_server_timeout_ms;
    /* Read-write lock: 0 (default) = a waiting writer blocks new readers (no writer starvation);
     * 1 = Redisson's reader-preferring behaviour. */
    int rw_reader_preferring;
    /* Diagnostics: called from any thread, including the watchdog and subscriber threads.
     * Must not call back into rlock. NULL (default) = silent. */
    void (*log_fn)(int level, const char *msg, void *user_data);
    int log_level; /* default RLOCK_LOG_WARN */
    /* Called once, from the watchdog thread (a loop client: from its loop), when a hold's lease
     * ran out while its owner still held it (renewals failed or the key was removed behind its
     * back). The owner's next rlock_unlock() returns RLOCK_ELOST. Must not call back into rlock.
     * NULL = no callback. */
    void (*on_lost)(const char *name, void *user_data);
    void *user_data; /* passed to log_fn and on_lost */
    /* TLS (used by every connection when the URL is rediss://). All strings are copied and
     * the files read by rlock_client_new(); a file that cannot be read, or does not hold what
     * it should, is RLOCK_EINVAL there, naming the file. The server's certificate chain and
     * its name are verified by default; a failure is RLOCK_ETLS with OpenSSL's reason.
     * tls_ca_file: PEM bundle of the CAs to trust; NULL = the system's default store.
     * tls_cert_file, tls_key_file: PEM client certificate (chain) and its private key, for
     * servers that require clients to present one (tls-auth-clients yes); both or neither.
     * tls_server_name: the name sent as SNI and checked against the certificate (a host name
     * or an IP address); NULL = the URL's host. */
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
    /* 1 = do NOT verify the server's certificate or name. The traffic is still encrypted, but
     * anyone who can intercept the connection can impersonate the server, read the password
     * sent with AUTH and every lock's data, and grant or deny locks at will. For tests against
     * throwaway servers only. Default 0. */
    int tls_insecure;
    /* Replica-synced writes (Redisson's checkLockSyncedSlaves): 1 (default) = after every script
     * that grants, re-enters, renews or releases, on a master with connected replicas, wait
     * (WAIT, pipelined behind the script) until all of them acknowledged it. A grant fewer
     * replicas acknowledged within replica_sync_timeout_ms is undone and the call returns
     * RLOCK_EREPLICA; see README "Deployments" for what this does and does not guarantee.
     * A waiting thread that a release grants the lock directly is told it holds it only after
     * the replicas acknowledged that grant (a grant they did not is given back).
     * On a cluster the replicas counted are those of the master that served the call, each
     * master's own. 0 = no waiting (a failover may then lose a grant). */
    int replica_sync;
    /* Bound on the replicas' acknowledgement. Default 1000 (Redisson slavesSyncTimeout). */
    int64_t replica_sync_timeout_ms;
    /* 1 = also wait for the master's AOF fsync (WAITAOF, Redis >= 7.2; an older server makes
     * rlock_client_new() fail with RLOCK_ENOTSUP). Default 0. */
    int replica_sync_aof;
    /* AUTH for the Sentinels of a redis-sentinel:// URL when they have their own ACL user or
     * password (NULL = no AUTH to Sentinels). Copied. */
    const char *sentinel_user;
    const char *sentinel_password;
    /* Pub/sub on a redis-cluster:// URL (ignored elsewhere), as Redisson's
     * shardedSubscriptionMode: RLOCK_CLUSTER_PUBSUB_AUTO (default) uses sharded pub/sub
     * (SPUBLISH / SSUBSCRIBE on the master that owns the channel's slot) when the cluster answers
     * PUBSUB SHARDNUMSUB (Redis >= 7.0), the probe Redisson makes, else classic PUBLISH /
     * SUBSCRIBE; RLOCK_CLUSTER_PUBSUB_SHARDED and RLOCK_CLUSTER_PUBSUB_CLASSIC force one mode.
     * Every client on a cluster, rlock or Redisson, must use the same mode: the two kinds of
     * channels are disjoint, and a waiter in the other mode hears no release (it then waits for
     * the lease to run out). Any other value is RLOCK_EINVAL in rlock_client_new(). */
    int cluster_pubsub;
    /* Room for future options: keep it zero (rlock_options_init() does). A new option takes
     * the place of reserved space of at least its size, so the struct keeps its size and the
     * offsets of every field before it. */
    void *reserved[2];
} rlock_options;

/* Values of rlock_options.cluster_pubsub. */
enum {
    RLOCK_CLUSTER_PUBSUB_AUTO = 0,
    RLOCK_CLUSTER_PUBSUB_SHARDED = 1,
    RLOCK_CLUSTER_PUBSUB_CLASSIC = 2
};

/* Fills *opts with the defaults above. Call it, then change what you need. */
RLOCK_EXPORT void rlock_options_init(rlock_options *opts);

typedef struct rlock_client rlock_client;

/* Creates a client. Copies everything it needs from *opts (NULL = defaults). Parses the URL and
 * dials one connection to check the server (AUTH, SELECT, a PING and INFO server, all within
 * connect_timeout_ms), so a wrong password or an unreachable server is reported here. With a
 * redis-sentinel:// URL it first asks the Sentinels in turn for the master (a Sentinel that is
 * down or answers nonsense is skipped) and checks with ROLE that the node is a master; all
 * Sentinels unreachable is RLOCK_ECONN naming them. With a redis-cluster:// URL it asks the
 * seeds in turn for the slot map (CLUSTER SHARDS, or CLUSTER SLOTS), then checks one master;
 * no seed answering with a map is RLOCK_ECONN naming the last failure. Starts the watchdog
 * thread and the subscriber. Returns RLOCK_OK and sets *out, or RLOCK_EINVAL (bad URL or
 * option), RLOCK_ECONN, RLOCK_EAUTH, RLOCK_ENOMEM, RLOCK_ENOTSUP (a server that cannot run
 * the scripts' flags, Redis older than 7.0, named with its version in rlock_last_error(); or
 * replica_sync_aof on a server older than 7.2); *out is NULL on failure. A user denied INFO
 * skips the version check. Valkey (any version) is accepted. Thread-safe. */
RLOCK_EXPORT int rlock_client_new(const rlock_options *opts, rlock_client **out);

/* Stops the background threads, closes every connection and frees the client. Holds still
 * registered with the watchdog are no longer renewed and expire after their lease. Handles
 * opened from this client stay valid objects: every call on them returns RLOCK_ECLOSED, and
 * they must still be freed with rlock_free(). Must not be called while another thread is inside
 * a call on this client or its handles. NULL is a no-op. */
RLOCK_EXPORT void rlock_client_free(rlock_client *client);

/* fork(): a client (and its handles) may be used on both sides of a fork(). The child is told
 * apart on its first call that uses the client (a pthread_atfork handler marks it; nothing to
 * call), and the client then becomes the child's own:
 *  - a new rlock_client_id(), so nothing the parent holds is the child's: the parent's holds are
 *    busy for the child (a try_lock with wait 0 returns RLOCK_ETIMEDOUT, never a re-entry), and
 *    in the child rlock_is_held() is 0, rlock_token() 0 and rlock_unlock() RLOCK_ENOTOWNER for
 *    them; the parent's leased semaphore permits are not renewed or reported by the child (they
 *    stay the parent's; their ids still release them, as from any process);
 *  - the inherited connections are closed in the child without a byte written on them (the
 *    parent keeps using them), and the child dials its own;
 *  - the child gets its own subscriber and watchdog threads, so its waiters are woken and its
 *    watchdog holds renewed.
 * Redis is not touched by any of this, and the parent is unaffected. rlock_client_free() in the
 * child frees the child's client only. Lock, semaphore and latch handles opened in the parent work
 * in the child. Do not fork() from inside a callback (log_fn, on_lost). The child relies on
 * malloc() and pthread_create() working after fork() in a multi-threaded process, as glibc's do
 * (POSIX promises only async-signal-safe functions there). */

/* ---------------------------------------------------------------------------------------------
 * Lock handles.
 * ------------------------------------------------------------------------------------------- */
/* The kind of lock a handle opens: the one enum of lock kinds, passed to rlock_open().
 * rlock_inspect() reports what it finds at a name as an rlock_lock_type instead, a separate enum
 * with values of its own (RLOCK_TYPE_FREE = 0, then one per data layout): data cannot tell a read
 * from a write side, a spin lock from a reentrant one, or an idle fair lock from a reentrant one,
 * and a free name has no kind. The two cannot share values without changing what existing
 * programs compare against, so rlock_kind_type() (beside rlock_inspect()) converts a kind to
 * the type its data shows. */
typedef enum rlock_kind {
    RLOCK_REENTRANT = 0, /* Redisson RLock: hash at name, owner -> hold count */
    RLOCK_FAIR = 1,      /* Redisson RFairLock: strict FIFO hand-off to waiters */
    RLOCK_READ = 2,      /* the read side of the read-write lock called name */
    RLOCK_WRITE = 3,     /* the write side of the read-write lock called name */
    /* Redisson RSpinLock: the reentrant lock's data (the two exclude each other on one name),
     * but a waiter polls instead of subscribing, for deployments where pub/sub is refused (an
     * ACL without subscribe, proxies such as twemproxy). The pause between attempts follows
     * Redisson's default exponential back-off: 1 ms, then doubled plus a random 0 .. n-1 ms
     * after the n-th busy attempt, at most 128 ms; so a release is noticed within 128 ms (plus
     * a round trip). A release still publishes Redisson's unlock message (through pcall, so a
     * user without publish releases too), which wakes reentrant waiters; a release by
     * Redisson's own RSpinLock publishes nothing, and such waiters then wake when their wait
     * bound (the lease) runs out. */
    RLOCK_SPIN = 4
} rlock_kind;

typedef struct rlock rlock;

/* Opens a handle on the lock called name (copied; 1 .. 1 MiB bytes, any bytes but NUL).
 * Opening does not touch Redis. Returns NULL on failure (RLOCK_EINVAL for a NULL client, an
 * unknown kind, or a NULL/empty/oversized name; RLOCK_ECLOSED; RLOCK_ENOMEM) with the detail in
 * rlock_last_error(). Do not use two lock types on one name: they share Redis keys.
 * Cluster clients: a name holding '{' or '}' must hold a hash tag (a '{' followed later by a '}'
 * with at least one byte between them, as "{user-42}:orders"), else RLOCK_EINVAL: Redisson's
 * rule derives the lock's other keys as "prefix:name" from such a name, and without a tag they
 * hash to other slots than the name (Redisson cannot use such names on a cluster either).
 * Names without braces need no tag. Other clients take every name. */
RLOCK_EXPORT rlock *rlock_open(rlock_client *client, rlock_kind kind, const char *name);

/* Creates a multi-lock: one handle over n >= 1 handles of any types, clients and servers, taken
 * all-or-nothing. The group borrows the handles (they must outlive it; free the group first) and
 * may not contain a group or the same handle twice. rlock_lock()/rlock_try_lock() either hold
 * every member when they return RLOCK_OK or hold none of them: on a member that is busy the
 * group releases what it took and waits for that member (via its normal notification), then
 * starts over, so two groups that overlap in opposite orders never deadlock or livelock.
 * rlock_unlock() releases every member; rlock_is_held() is 1 only if all are held; hold count,
 * TTL and force unlock return RLOCK_ENOTSUP; rlock_is_locked() is 1 if any member is locked;
 * rlock_token() returns 0. NULL + last error on failure. */
RLOCK_EXPORT rlock *rlock_multi_new(rlock *const *locks, size_t n);

/* Creates a RedLock over n handles that live on n independent Redis servers, following the
 * Redlock algorithm: the acquire is sent to every server before any reply is read (each reply
 * bounded by that member client's redlock_server_timeout_ms); it succeeds only with n/2+1 grants
 * and a remaining validity lease - elapsed - (lease/100 + 2 ms) > 0 on the monotonic clock;
 * otherwise what was taken is released on every server at once and the attempt is retried after
 * a random delay (or earlier, on the busy server's unlock message) while wait time is left.
 * Members must be RLOCK_REENTRANT handles (else RLOCK_ENOTSUP), 1 <= n <= 16, each on its own
 * client (else RLOCK_EINVAL). Same borrowing rules as rlock_multi_new().
 * Cluster: a member on a cluster client goes to the master of its name's slot (a MOVED refreshes
 * that client's map for the next attempt), so a RedLock over clients of separate clusters (or of
 * a cluster and standalone servers) works. Names of one cluster client are refused like any
 * shared client: the masters of one cluster are not independent servers for a quorum, as a
 * reshard may move two members' slots onto one master, whose crash would then take a majority;
 * on one cluster use a plain lock (one master, replica_sync for its replicas), or a multi-lock
 * when every name must be held.
 * With lease_ms < 0 each member client's watchdog renews its server's hold; when fewer than a
 * majority remain alive the group is lost: on_lost fires once (through member 0's client, with
 * member 0's name) and rlock_unlock() returns RLOCK_ELOST, as it does after the validity ran out.
 * Re-entry is counted locally and does not extend validity. rlock_is_locked() is 1 only when a
 * majority of servers have the key; force unlock, hold count and TTL return RLOCK_ENOTSUP.
 * rlock_token() returns the largest per-server token among the granting majority (0 with no
 * hold): see the README for what that guarantees and what it does not. Once any member's client
 * is freed every call returns RLOCK_ECLOSED. */
RLOCK_EXPORT rlock *rlock_redlock_new(rlock *const *locks, size_t n);

/* Frees a handle. Holds of the handle still registered with the watchdog stop being renewed and
 * expire after their lease. The caller must ensure no other thread is using the handle.
 * NULL is a no-op. */
RLOCK_EXPORT void rlock_free(rlock *lock);

/* ---------------------------------------------------------------------------------------------
 * Operations (every lock type). "Calling thread" = the owner of the hold.
 * Thread-safety: all functions may be called from many threads on one handle at once.
 * ------------------------------------------------------------------------------------------- */

/* Acquires the lock, waiting as long as it takes (waits are woken by pub/sub, not polling).
 * lease_ms > 0: the hold expires lease_ms after acquisition unless released; no renewal.
 * lease_ms < 0: the hold lasts until unlock; the watchdog keeps a lease of watchdog_timeout_ms.
 * lease_ms == 0 or > RLOCK_MAX_DURATION_MS: RLOCK_EINVAL.
 * Re-entry by the holding thread increments the hold count and succeeds at once. A re-entry
 * never shortens a hold (Redisson's does): a hold under the watchdog stays under it until its
 * last unlock, whatever lease a re-entry asks for; an explicit lease on re-entry extends the
 * hold only if it is longer than what is left; a partial unlock keeps the longest lease granted
 * (RLOCK_READ: each read hold keeps its own lease, as in Redisson, and the lock lives as long as
 * the longest remaining one).
 * Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_EDEADLK (write requested by a thread holding only the
 * read side), RLOCK_ECONN/EREDIS/EPROTO/EAUTH, RLOCK_ECLOSED. A wait whose SUBSCRIBE to the
 * lock's channel Redis refuses (an ACL user without the command or the channel) returns
 * RLOCK_EREDIS with Redis' text at once; one not confirmed within subscription_timeout_ms
 * returns RLOCK_ECONN. With replica_sync, a grant (or re-entry) that fewer replicas acknowledged
 * within replica_sync_timeout_ms is given back (best effort) and the call returns RLOCK_EREPLICA
 * ("k of n replicas acknowledged"); the lock is then not held. Errors of the first attempt are
 * returned at once; a waiter (the lock was busy) whose later attempt meets RLOCK_ECONN or
 * RLOCK_EREPLICA (a failover, a restart) keeps waiting while its wait lasts, pausing 10 ms to 1 s
 * between attempts, and returns that error only when the wait ends (rlock_lock(): never, unless
 * rlock_client_interrupt()). An attempt whose reply was lost may have been granted: the thread's
 * next attempt gives such a grant back first, so it is never counted as a re-entry. */
RLOCK_EXPORT int rlock_lock(rlock *lock, int64_t lease_ms);

/* Like rlock_lock() but gives up after wait_ms: 0 = a single attempt (a fair lock does not join
 * the queue), RLOCK_WAIT_FOREVER or anything above RLOCK_MAX_DURATION_MS = no limit, < 0 =
 * RLOCK_EINVAL. Returns RLOCK_OK or RLOCK_ETIMEDOUT (not acquired), or an error as rlock_lock().
 * With a limit, the call returns within wait_ms + command_timeout_ms (plus, with replica_sync,
 * the replicas' acknowledgement of a grant): every command it sends must finish by then (one
 * that cannot fails with RLOCK_ECONN), also while Redis is paused or stopped.
 * A waiter that gives up (timeout or error) has left every queue before the call returns, unless
 * Redis did not answer its give-up in that time (paused, stopped, unreachable). Its entry (fair
 * queue, waiting writers, waiting reentrant threads) then ends waiter_timeout_ms after the last
 * heartbeat Redis ran (one sent before the give-up may still run when Redis answers again); until
 * then a waiting writer entry keeps new readers out, and a release may grant the lock to the
 * departed waiter (reentrant and fair locks), which then holds it no longer than
 * min(lease, waiter_timeout_ms) before the next waiter gets it. The thread's next lock
 * of that handle leaves again and gives such a grant back first, so it never counts it as a
 * re-entry.
 * Reentrant and fair locks: a release may grant the lock directly to a waiting rlock thread (no
 * attempt of its own follows; rlock_options.waiter_timeout_ms). A wait that runs out just as
 * such a grant arrives returns RLOCK_OK (the caller holds the lock, with the grant's token),
 * slightly after wait_ms; a wait that ends with an error as the grant arrives releases it (the
 * next waiter gets it) and returns the error. */
RLOCK_EXPORT int rlock_try_lock(rlock *lock, int64_t wait_ms, int64_t lease_ms);

/* Releases one hold of the calling thread (the lock is free when the count reaches 0; waiters
 * are notified). Returns RLOCK_OK; RLOCK_ENOTOWNER if the calling thread holds no hold of this
 * handle's lock; RLOCK_ELOST if the hold's lease ran out while held (the hold is dropped;
 * Redis is not touched, but since the loss was judged by the client's clock, the thread's next
 * lock through this handle first gives back a hold that still stood on Redis, so it never
 * re-enters it); or a connection/Redis error (the watchdog entry is cancelled
 * either way once the hold is gone). No renewal of the hold runs after this returns. A release
 * whose wake-up message Redis refused (an ACL user without `publish` or the lock's channel) still
 * returns RLOCK_OK; the client logs the refusal once, at WARN, and waiters then wake by their
 * wait bound (the lease) instead (README "Least privilege"). A connection error leaves the
 * release's outcome unknown: the hold stays recorded, and the calling thread's next
 * rlock_unlock() (a retry) or lock through this handle first asks Redis (HGET of its field)
 * whether that release ran: a release that ran is not sent again (the retry returns RLOCK_OK),
 * one that did not is sent then. Holds of the same lock the thread took through another handle
 * share the field and can make a release that ran look as if it had not. With replica_sync, a
 * release that fewer replicas acknowledged still returns RLOCK_OK (the master released; logged at
 * WARN); the calling thread's next lock or unlock through this handle first checks (HGET) that
 * the release stayed, and gives back a hold that a failover to a replica that missed it brought
 * back, so that hold is never re-entered. With replica_sync, a release that found no hold on a
 * node whose replicas did not acknowledge (a restarted master that lost its data and does not
 * know yet that it was replaced) returns RLOCK_EREPLICA and leaves the outcome unknown as a
 * connection error does: that node's "not held" is not believed, and the settling HGET above is
 * believed only when the replicas acknowledge it too. */
RLOCK_EXPORT int rlock_unlock(rlock *lock);

/* Deletes the lock whoever holds it and wakes waiters. Returns 1 if it was locked, 0 if it was
 * not, or a negative error. Multi-lock and RedLock groups: RLOCK_ENOTSUP. */
RLOCK_EXPORT int rlock_force_unlock(rlock *lock);

/* 1 if anyone holds the lock (for RLOCK_READ: any reader, or a writer that also reads),
 * 0 if not, or a negative error. */
RLOCK_EXPORT int rlock_is_locked(rlock *lock);

/* 1 if the calling thread holds the lock (verified on Redis), 0 if not, or a negative error. */
RLOCK_EXPORT int rlock_is_held(rlock *lock);

/* The calling thread's hold count on Redis (0 if none), or a negative error. */
RLOCK_EXPORT int rlock_hold_count(rlock *lock);

/* Errors of rlock_remaining_ttl_ms() are shifted below -2 so they cannot be mistaken for
 * Redis' -1/-2: the value is RLOCK_TTL_ERROR(code), and RLOCK_TTL_CODE(value) gives it back. */
#define RLOCK_TTL_ERROR(code) ((int64_t)(code)-1000)
#define RLOCK_TTL_CODE(value) ((int)((value) + 1000))

/* Remaining lease of the lock key in ms; -2 if not locked, -1 if it has no expiry; a value
 * below -2 is an error: RLOCK_TTL_CODE(value) is the RLOCK_E* code. */
RLOCK_EXPORT int64_t rlock_remaining_ttl_ms(rlock *lock);

/* Fencing token of the calling thread's current hold (strictly increasing per lock name for
 * exclusive grants; a read grant returns the counter's current value), 0 if none. After a
 * successful exclusive lock it is never 0: a thread that holds the lock through another handle
 * too gets the hold's token. Answered from
 * the local hold record without a round trip: a hold taken with an explicit lease that expired
 * unnoticed still reports its token until a call that asks Redis (unlock, is_held) finds it
 * gone; a hold the watchdog found lost reports 0 at once. */
RLOCK_EXPORT uint64_t rlock_token(rlock *lock);

/* ---------------------------------------------------------------------------------------------
 * Semaphores (Redisson RSemaphore and RPermitExpirableSemaphore data: the permits counter is a
 * string at name, leased permits live in the zset {name}:timeout, wake-ups go over
 * redisson_sc:{name}), so Java and C processes can share one semaphore.
 * Thread-safety: every call may be made from many threads on one handle at once.
 * ------------------------------------------------------------------------------------------- */
typedef struct rlock_semaphore rlock_semaphore;

/* Length of a leased permit's id as text: 32 lower-case hex digits (16 random bytes, stored raw
 * in Redis as Redisson stores them). */
#define RLOCK_PERMIT_ID_LEN 32

/* Opens a handle on the semaphore called name (copied; same rules as rlock_open()). Does not
 * touch Redis. NULL + last error (RLOCK_EINVAL, RLOCK_ECLOSED, RLOCK_ENOMEM) on failure. */
RLOCK_EXPORT rlock_semaphore *rlock_semaphore_open(rlock_client *client, const char *name);

/* Frees the handle. Leased permits it holds under the watchdog stop being renewed and come back
 * to the pool when their lease runs out. NULL is a no-op. No other thread may use the handle. */
RLOCK_EXPORT void rlock_semaphore_free(rlock_semaphore *sem);

/* Sets the permits if the semaphore was never set (a never-set semaphore has 0 permits, as in
 * Redisson). permits 0 .. 2^31-1 (2147483647), else RLOCK_EINVAL. Returns 1 set, 0 it was already
 * set, or a negative error.
 * Bounds: every permit count a call takes is at most 2^31-1, which keeps each sum the scripts
 * form exact in Lua's numbers; a call beyond returns RLOCK_EINVAL and writes nothing. The count on
 * Redis itself may grow past 2^31-1 through adds and releases (rlock_semaphore_available() reports
 * it). */
RLOCK_EXPORT int rlock_semaphore_try_set_permits(rlock_semaphore *sem, int64_t permits);

/* rlock_semaphore_try_set_permits() that also gives the counter a time to live of ttl_ms
 * (1 .. RLOCK_MAX_DURATION_MS, else RLOCK_EINVAL; Redisson trySetPermits(permits, timeToLive)):
 * when it runs out the semaphore is never-set again. Returns 1 set, 0 it was already set (its TTL
 * is left as it is), or a negative error. */
RLOCK_EXPORT int rlock_semaphore_try_set_permits_ttl(rlock_semaphore *sem, int64_t permits,
                                                     int64_t ttl_ms);

/* Adds delta permits (delta != 0 and within -(2^31-1) .. 2^31-1, else RLOCK_EINVAL; negative
 * removes permits and may take the count below 0, as Redisson's addPermits). Like Redisson it
 * clears a TTL set on the key. Returns RLOCK_OK or a negative error. */
RLOCK_EXPORT int rlock_semaphore_add_permits(rlock_semaphore *sem, int64_t delta);

/* Permits available now (after returning expired leased permits to the pool): >= 0, or a
 * negative RLOCK_E* code. A count taken below 0 by add_permits reads as 0. */
RLOCK_EXPORT int64_t rlock_semaphore_available(rlock_semaphore *sem);

/* Takes permits (1 .. 2^31-1, else RLOCK_EINVAL) plain permits: they belong to nobody and
 * anyone may release them.
 * wait_ms as rlock_try_lock(): 0 = one attempt, RLOCK_WAIT_FOREVER = no limit, < 0 = EINVAL.
 * Waiting is driven by pub/sub: a release of k permits wakes at most k waiters per process, and
 * a waiter re-attempts whenever a wake-up arrived while it was not asleep. With replica_sync,
 * permits that fewer replicas acknowledged within replica_sync_timeout_ms are given back (best
 * effort) and the call returns RLOCK_EREPLICA ("k of n replicas acknowledged").
 * A lost reply (a connection killed or timed out after the attempt was sent) is resent for up to
 * command_timeout_ms and never takes permits twice; if the call still ends without permits, it
 * is settled on Redis first: permits an attempt took are kept and the call returns RLOCK_OK, or
 * the call is cancelled so that no copy of an attempt still on its way takes any. When Redis
 * stays unreachable for that too (logged at WARN), the handle's next call (any call on it) gives
 * back what the failed call took, for up to 6 x command_timeout_ms + 10 s; past that such permits
 * may stay taken. A call that loses replies can last up to 3 command timeouts longer than
 * wait_ms, and 3 more to settle.
 * Returns RLOCK_OK, RLOCK_ETIMEDOUT, RLOCK_EINVAL, RLOCK_EREPLICA, or a connection/Redis error. */
RLOCK_EXPORT int rlock_semaphore_acquire(rlock_semaphore *sem, int64_t permits, int64_t wait_ms);

/* Returns permits (1 .. 2^31-1, else RLOCK_EINVAL) plain permits and wakes up to that many waiters
 * per process. A release whose reply was lost is resent for up to command_timeout_ms and applied
 * exactly once (a short-lived request key, {name}:rlock_request:<id>, makes a resend whose first
 * copy ran a no-op). RLOCK_ECONN means no copy was answered: the release may still be applied,
 * at most once (e.g. by a stalled server when it runs again), so releasing again could return the
 * permits twice. Returns RLOCK_OK, RLOCK_EINVAL, or a connection/Redis error. */
RLOCK_EXPORT int rlock_semaphore_release(rlock_semaphore *sem, int64_t permits);

/* Takes one leased permit and writes its id (32 hex digits + NUL) to permit_id.
 * lease_ms > 0: the permit comes back to the pool lease_ms after acquisition unless released.
 * lease_ms < 0: the client's watchdog keeps a lease of watchdog_timeout_ms renewed until
 * release, so a crashed holder's permit comes back within that timeout; if the permit is lost
 * anyway (renewals failed, or it was removed behind the holder's back) on_lost is called with
 * the semaphore's name and release_leased() returns RLOCK_ELOST.
 * lease_ms == 0 or > RLOCK_MAX_DURATION_MS: RLOCK_EINVAL. wait_ms as rlock_semaphore_acquire().
 * A waiter also wakes when the earliest lease of the semaphore runs out. A watchdog permit should
 * be released through the handle that took it: released elsewhere (another handle or process),
 * its holder's watchdog finds it gone and reports it lost. Replica sync as for
 * rlock_semaphore_acquire() (RLOCK_EREPLICA: the permit was given back), and so are lost
 * replies: the permit an attempt took unseen is kept and reported, or given back; one that could
 * not be settled is given back by the handle's next call, or comes back when its lease runs out.
 * Returns RLOCK_OK, RLOCK_ETIMEDOUT, RLOCK_EINVAL, RLOCK_EREPLICA, or a connection/Redis error. */
RLOCK_EXPORT int rlock_semaphore_acquire_leased(rlock_semaphore *sem, int64_t wait_ms,
                                                int64_t lease_ms,
                                                char permit_id[RLOCK_PERMIT_ID_LEN + 1]);

/* Returns the leased permit with this id (from any handle or process, also a Redisson peer's)
 * and wakes one waiter. Returns RLOCK_OK; RLOCK_ENOTOWNER if no such permit is held (released
 * already, or its lease ran out); RLOCK_ELOST if this handle's watchdog had found it lost;
 * RLOCK_EINVAL for an id that is not 32 hex digits; or a connection/Redis error. A lost reply
 * is resent as for rlock_semaphore_release(), and the resend reports the first run's outcome
 * (RLOCK_OK, not RLOCK_ENOTOWNER, when the first copy released the permit). */
RLOCK_EXPORT int rlock_semaphore_release_leased(rlock_semaphore *sem, const char *permit_id);

/* Takes every available permit (Redisson RSemaphore.drainPermits: the count is set to 0, which
 * clears a TTL on it). Returns the permits taken (>= 0; a count below 0 after a negative add is
 * set to 0 too and reports 0), or a negative error. Leased permits stay with their holders. A
 * drain whose reply was lost is resent and applied once, as rlock_semaphore_release(). */
RLOCK_EXPORT int64_t rlock_semaphore_drain(rlock_semaphore *sem);

/* Makes the semaphore's total permits (available plus leased) permits, 0 .. 2^31-1, else
 * RLOCK_EINVAL (Redisson RPermitExpirableSemaphore.setPermits): the available count moves by
 * the difference and may go below 0 while more leased permits are held; a never-set semaphore
 * is set. Plain permits taken by acquire count as gone, as in Redisson. Wakes waiters when
 * permits became available. Returns RLOCK_OK or a negative error; a lost reply is resent and
 * applied once. */
RLOCK_EXPORT int rlock_semaphore_set_permits(rlock_semaphore *sem, int64_t permits);

/* Gives the leased permit with this id (any holder's) a lease of lease_ms from now
 * (1 .. RLOCK_MAX_DURATION_MS, else RLOCK_EINVAL; Redisson updateLeaseTime). A watchdog permit of
 * this handle stops being renewed: it keeps the new lease. Expired leases go back to the pool
 * first. Returns RLOCK_OK; RLOCK_ENOTOWNER if no such permit is held (released, or its lease ran
 * out); RLOCK_EINVAL for an id that is not 32 hex digits; or a negative error. */
RLOCK_EXPORT int rlock_semaphore_update_lease(rlock_semaphore *sem, const char *permit_id,
                                              int64_t lease_ms);

/* The remaining lease of the leased permit with this id (any holder's; Redisson getLeaseTime) in
 * *lease_ms: ms left (> 0; a watchdog permit's runs to its next renewal), or -1 for a permit
 * without expiry (taken by Redisson without a lease). Returns RLOCK_OK; RLOCK_ENOTOWNER if no such
 * permit is held; RLOCK_EINVAL for a malformed id or NULL; or a negative error. */
RLOCK_EXPORT int rlock_semaphore_remaining_lease_ms(rlock_semaphore *sem, const char *permit_id,
                                                    int64_t *lease_ms);

/* The most leased permits one call takes or releases (rlock_semaphore_acquire_leased_n(),
 * rlock_semaphore_release_leased_n()). */
#define RLOCK_PERMIT_IDS_MAX 16

/* Takes permits (1 .. RLOCK_PERMIT_IDS_MAX, else RLOCK_EINVAL) leased permits at once, all or
 * none (Redisson tryAcquire(permits, waitTime, leaseTime)), and writes their ids to
 * permit_ids[0 .. permits-1]. Otherwise as rlock_semaphore_acquire_leased(), whose one-permit
 * call this is; each permit is released on its own. */
RLOCK_EXPORT int rlock_semaphore_acquire_leased_n(rlock_semaphore *sem, int64_t permits,
                                                  int64_t wait_ms, int64_t lease_ms,
                                                  char (*permit_ids)[RLOCK_PERMIT_ID_LEN + 1]);

/* Releases count (1 .. RLOCK_PERMIT_IDS_MAX) leased permits (Redisson tryRelease(List)): each as
 * rlock_semaphore_release_leased(), one after the other. Returns how many were released (an id
 * no longer held, or lost, counts as not released), RLOCK_EINVAL (checked for every id before
 * any is released: NULL, a count out of range, an id that is not 32 hex digits), or a
 * connection/Redis error, after which the ids before the failing one are released. */
RLOCK_EXPORT int rlock_semaphore_release_leased_n(rlock_semaphore *sem,
                                                  const char *const *permit_ids, size_t count);

/* Returns permits (1 .. 2^31-1, else RLOCK_EINVAL) plain permits as rlock_semaphore_release(),
 * but only to a semaphore that exists (Redisson releaseIfExists): returns 1 released, 0 the
 * semaphore was never set (nothing written), or a negative error. */
RLOCK_EXPORT int rlock_semaphore_release_if_exists(rlock_semaphore *sem, int64_t permits);

/* The semaphore's total permits: available plus leased permits held, after returning expired
 * leases to the pool (Redisson getPermits); 0 for a never-set semaphore, and a total taken below 0
 * reads as 0. Plain permits taken by acquire are not counted. Or a negative error. */
RLOCK_EXPORT int64_t rlock_semaphore_permits(rlock_semaphore *sem);

/* The leased permits held now, after returning expired leases to the pool (Redisson
 * acquiredPermits), or a negative error. */
RLOCK_EXPORT int64_t rlock_semaphore_acquired(rlock_semaphore *sem);

/* ---------------------------------------------------------------------------------------------
 * Count-down latch (Redisson RCountDownLatch data: the count is a string at name, wake-ups go
 * over redisson_countdownlatch__channel__{name}).
 * ------------------------------------------------------------------------------------------- */
typedef struct rlock_latch rlock_latch;

/* Opens a handle on the latch called name (same rules as rlock_open(), except on a cluster
 * client, where the name must not hold '}': the channel wraps it in braces, whatever it holds).
 * NULL + last error. */
RLOCK_EXPORT rlock_latch *rlock_latch_open(rlock_client *client, const char *name);

/* Frees the handle. NULL is a no-op. */
RLOCK_EXPORT void rlock_latch_free(rlock_latch *latch);

/* Starts counting from count (1 .. 2^31-1, i.e. 2147483647; else RLOCK_EINVAL, nothing written)
 * if the latch is not counting. Returns 1 set, 0 already counting, or a negative error. */
RLOCK_EXPORT int rlock_latch_try_set_count(rlock_latch *latch, int64_t count);

/* Counts down by one; reaching 0 releases every waiter (a latch not counting stays at 0).
 * Returns RLOCK_OK or a negative error. With replica_sync, RLOCK_EREPLICA when fewer replicas
 * acknowledged the count-down in time: it is NOT undone (waiters may have been released), so a
 * failover may forget it, and counting down again would count twice on this master. A lost reply
 * is resent for up to command_timeout_ms and counts once, as rlock_semaphore_release(); after
 * RLOCK_ECONN the count-down may still be applied, at most once. */
RLOCK_EXPORT int rlock_latch_count_down(rlock_latch *latch);

/* The current count (0 when not counting), or a negative RLOCK_E* code. */
RLOCK_EXPORT int64_t rlock_latch_count(rlock_latch *latch);

/* Waits until the count is 0: returns RLOCK_OK at once for a latch never set (count 0, as
 * Redisson), RLOCK_ETIMEDOUT after wait_ms (as rlock_try_lock()), or a negative error. The wait
 * is woken by the count-down's message, not by polling. */
RLOCK_EXPORT int rlock_latch_await(rlock_latch *latch, int64_t wait_ms);

/* Deletes the latch's count (Redisson delete, which publishes its new-count message "1"): an
 * await that starts afterwards returns RLOCK_OK at once, while waiters already blocked are not
 * woken by it (as Redisson's are not). Returns 1 deleted, 0 the latch was not counting, or a
 * negative error. A lost reply is resent and applied once, as rlock_latch_count_down(). */
RLOCK_EXPORT int rlock_latch_delete(rlock_latch *latch);

/* ---------------------------------------------------------------------------------------------
 * Leader election: one active instance among many, with a term every follower can see. Built on
 * the fair lock called name (candidates queue in arrival order; rlock status shows it), so the
 * term is that lock's fencing token and strictly increases from leader to leader. The leader's
 * value and term are kept in "{name}:rlock_election" (a hash; "name:rlock_election" for a name
 * with a hash tag), and each new leader publishes on rlock_election:{name}: a least-privilege
 * ACL (README) adds ~rlock_election:{app:* and &rlock_election:{app:* for them.
 * Leadership belongs to the thread that campaigned, as a lock hold does.
 * ------------------------------------------------------------------------------------------- */
typedef struct rlock_election rlock_election;

/* Opens a handle on the election called name (the rules of rlock_open()). Does not touch Redis.
 * NULL + last error on failure. */
RLOCK_EXPORT rlock_election *rlock_election_open(rlock_client *client, const char *name);

/* Waits up to wait_ms (as rlock_try_lock()) to become the leader, then records value (copied, at
 * most 64 KiB; "" allowed) as the leader's and wakes every observer. The hold is kept by the
 * watchdog: a leader whose renewals fail (its process paused past the watchdog timeout, a
 * failover that lost the hold) stops being the leader, on_lost is called with the election's
 * name, and the next candidate in line takes over with a higher term. A leader that campaigns
 * again only replaces its value. Returns RLOCK_OK (leader), RLOCK_ETIMEDOUT, RLOCK_EINVAL,
 * RLOCK_ELOST (the hold ran out before it was recorded), or an error as rlock_try_lock(). */
RLOCK_EXPORT int rlock_election_campaign(rlock_election *e, const char *value, int64_t wait_ms);

/* The current leader: 1 with *value (malloc()ed; free it with free()) and *term while a leader
 * holds; 0 when none does (*value NULL, *term the last leader's term, 0 if there never was one);
 * or a negative error (*value NULL). term may be NULL. */
RLOCK_EXPORT int rlock_election_leader(rlock_election *e, char **value, uint64_t *term);

/* As rlock_election_leader(), and *since_ms (when not NULL) is when the current leader's term
 * began, in milliseconds since the Unix epoch on the Redis server's clock (0 when none leads). */
RLOCK_EXPORT int rlock_election_leader_since(rlock_election *e, char **value, uint64_t *term,
                                             int64_t *since_ms);

/* Waits until a leader with a term after after_term has been elected (woken by that leader's
 * message; not polling), or wait_ms passed (as rlock_try_lock(); 0 = look once). Returns
 * RLOCK_OK, RLOCK_ETIMEDOUT, or a negative error. Pass the term rlock_election_leader() gave to
 * wait for the next leader. */
RLOCK_EXPORT int rlock_election_observe(rlock_election *e, uint64_t after_term, int64_t wait_ms);

/* Gives up the calling thread's leadership: its value is taken out of the record (the term
 * stays), the fair lock is released and the next candidate in line becomes the leader. Returns
 * RLOCK_OK, RLOCK_ENOTOWNER (the thread does not lead), RLOCK_ELOST (its hold had run out), or
 * an error as rlock_unlock(). */
RLOCK_EXPORT int rlock_election_resign(rlock_election *e);

/* Frees the handle. A leadership it still holds is not renewed any more and ends when its lease
 * runs out. NULL is a no-op. */
RLOCK_EXPORT void rlock_election_free(rlock_election *e);

/* ---------------------------------------------------------------------------------------------
 * Inspection and interruption (operators' tools, such as the `rlock` command).
 * ------------------------------------------------------------------------------------------- */

/* What rlock_inspect() found at a lock name. */
typedef enum rlock_lock_type {
    RLOCK_TYPE_FREE = 0,      /* no lock key, no waiter */
    RLOCK_TYPE_REENTRANT = 1, /* a hash of owners without "mode" and no fair queue (or waiting
                               * rlock threads only); a fair lock with an empty queue looks
                               * exactly like this (same data) */
    RLOCK_TYPE_FAIR = 2,      /* a fair waiter queue exists (held or not) */
    RLOCK_TYPE_RW = 3         /* a hash with a "mode" field, or waiting writers only */
} rlock_lock_type;

/* The rlock_lock_type that rlock_inspect() reports for a lock of this kind while it is held:
 * RLOCK_TYPE_REENTRANT for RLOCK_REENTRANT and RLOCK_SPIN (one data layout), RLOCK_TYPE_FAIR for
 * RLOCK_FAIR (RLOCK_TYPE_REENTRANT when its queue is empty: the same data), RLOCK_TYPE_RW for
 * RLOCK_READ and RLOCK_WRITE. An unknown kind gives RLOCK_TYPE_FREE. Inline: no symbol. */
static inline rlock_lock_type rlock_kind_type(rlock_kind kind)
{
    switch (kind) {
    case RLOCK_REENTRANT:
    case RLOCK_SPIN:
        return RLOCK_TYPE_REENTRANT;
    case RLOCK_FAIR:
        return RLOCK_TYPE_FAIR;
    case RLOCK_READ:
    case RLOCK_WRITE:
        return RLOCK_TYPE_RW;
    }
    return RLOCK_TYPE_FREE;
}

typedef struct rlock_lock_holder {
    char *owner;   /* field as stored: "<uuid>:<thread>", a writer "<uuid>:<thread>:write" */
    int64_t count; /* hold count */
} rlock_lock_holder;

typedef struct rlock_lock_waiter {
    char *owner;         /* "<uuid>:<thread>" (waiting writers: "<uuid>:<thread>:write") */
    int64_t deadline_ms; /* liveness deadline, server clock, ms since the epoch; -1 if none */
} rlock_lock_waiter;

typedef struct rlock_lock_info {
    char *name;           /* the lock name */
    rlock_lock_type type; /* see rlock_lock_type */
    int locked;           /* 1 if somebody holds it */
    const char *mode;     /* read-write lock: "read" or "write" while held, else NULL */
    size_t n_holders;
    rlock_lock_holder *holders; /* hash fields other than "mode", in Redis' order */
    int64_t ttl_ms;             /* PTTL of the lock key: -2 not locked, -1 no expiry */
    uint64_t token;             /* fencing counter redisson_lock_token:{name}; 0 if never set */
    size_t n_queue;
    rlock_lock_waiter *queue; /* fair queue in order: queue[0] is next in line */
    size_t n_writers;
    rlock_lock_waiter *writers; /* read-write lock: waiting writers, earliest deadline first */
    int64_t server_time_ms;     /* the server's clock when it was read (compare deadlines) */
    size_t n_waiters;
    rlock_lock_waiter *waiters; /* reentrant lock: its waiting rlock threads (Redisson's
                                 * waiters are not recorded), earliest deadline first */
} rlock_lock_info;

/* Reads every key of the lock called name in one read-only script, without changing anything
 * (no lease, queue or counter is touched; it does not open a handle, so it knows nothing of the
 * calling thread). Works on locks written by any rlock lock type or by Redisson, since they share
 * one data layout. On RLOCK_OK *out is a snapshot to free with rlock_lock_info_free(). Returns
 * RLOCK_EINVAL for a NULL client/out or a NULL/empty name, a name a cluster client refuses (see
 * rlock_open()), or for a name whose key holds something other than a lock (a string, a list ...:
 * the message names the Redis type); RLOCK_ECLOSED, RLOCK_ECONN/EREDIS/EPROTO, RLOCK_ENOMEM; *out
 * is NULL on failure. */
RLOCK_EXPORT int rlock_inspect(rlock_client *client, const char *name, rlock_lock_info **out);

/* Frees what rlock_inspect() returned. NULL is a no-op. */
RLOCK_EXPORT void rlock_lock_info_free(rlock_lock_info *info);

/* What rlock_survey() found at a name. A semaphore (RSemaphore) and a count-down latch store the
 * same data, one integer under the name, so the survey tells them apart by who listens on their
 * Redisson channel; with nobody waiting it cannot, and says RLOCK_OBJECT_COUNTER. */
typedef enum rlock_object_type {
    RLOCK_OBJECT_LOCK = 0,             /* a lock of any type: see lock */
    RLOCK_OBJECT_SEMAPHORE = 1,        /* a counter with listeners on redisson_sc:{name} */
    RLOCK_OBJECT_SEMAPHORE_LEASED = 2, /* a counter with leased permits ({name}:timeout) */
    RLOCK_OBJECT_LATCH = 3,            /* a counter with listeners on the latch's channel */
    RLOCK_OBJECT_COUNTER = 4           /* a semaphore or a latch: nobody listens to say which */
} rlock_object_type;

typedef struct rlock_object_info {
    char *name;
    rlock_object_type type;
    rlock_lock_info *lock; /* RLOCK_OBJECT_LOCK: what rlock_inspect() gives; else NULL */
    int64_t count;         /* counters: permits available (a leased semaphore's expired leases
                            * counted as available, as the next acquire returns them); a latch's
                            * count */
    int64_t ttl_ms;        /* counters: PTTL of the name (-1 no expiry) */
    size_t n_leases;
    rlock_lock_waiter *leases; /* leased semaphore: owner = the permit id (32 hex digits),
                                * deadline_ms = its expiry (server clock), earliest first */
    int64_t listeners; /* counters: subscribers of the semaphore's channel (or the latch's, for
                        * a latch), which are the waiting clients; -1 when Redis refused PUBSUB
                        * NUMSUB. Locks: 0 */
} rlock_object_info;

/* Finds the locks, semaphores and latches whose names match the glob pattern (Redis' SCAN
 * MATCH syntax; NULL or "" = "*") and reads each one, for `rlock top`. Read-only: it sends SCAN,
 * SCRIPT LOAD, EVALSHA_RO of lua/inspect.lua (which only reads; EVALSHA of it for a user who may
 * run only that, such as docs/acl.md's lock user), GET, PTTL, ZRANGE, TIME and PUBSUB NUMSUB,
 * nothing else, so it works as a user without any write permission. On a cluster
 * client every master is scanned. Reads are pipelined per node, a few round trips for any
 * number of names. Redisson's auxiliary keys (a fair queue, the fencing counter, a leased
 * semaphore's {name}:timeout, {name}:... keys) are read as part of their object, never listed
 * on their own; a key that holds something else (a list, a string that is not a number) is left
 * out. A name deleted during the scan is left out. On RLOCK_OK *out holds *n entries in no
 * particular order (free with rlock_survey_free(); *out may be NULL when *n is 0). Returns
 * RLOCK_EINVAL for a NULL client/out/n or a pattern over 1024 bytes, RLOCK_ECLOSED,
 * RLOCK_ECONN/EREDIS (e.g. SCAN refused)/EPROTO, RLOCK_ENOMEM. */
RLOCK_EXPORT int rlock_survey(rlock_client *client, const char *pattern, rlock_object_info **out,
                              size_t *n);

/* Frees what rlock_survey() returned. NULL is a no-op. */
RLOCK_EXPORT void rlock_survey_free(rlock_object_info *objects, size_t n);

/* The client's identity as it appears in owners on Redis: the "<uuid>" of "<uuid>:<thread>"
 * (36 characters). Valid as long as the client; "" for NULL. Lets a tool find its own entries
 * in an rlock_inspect() snapshot. In the child of a fork() it is the child's new id (see fork()
 * above), which overwrites the same buffer: copy it to compare across the fork. */
RLOCK_EXPORT const char *rlock_client_id(const rlock_client *client);

/* Interrupts the client's waits, for a program that is shutting down (for example from the thread
 * that handles SIGTERM): every rlock_lock()/rlock_try_lock() on a handle of this client (and
 * multi-locks over such handles) that is waiting now, or that would start waiting later, stops
 * waiting, leaves every queue it joined (fair queue, waiting writers) and returns
 * RLOCK_ETIMEDOUT with "interrupted" in rlock_last_error(), also when no wait limit was given.
 * Semaphore acquires and latch awaits of this client stop waiting too and return RLOCK_ETIMEDOUT.
 * A lock that is free is still taken by the first attempt. Irreversible: create a new client to
 * wait again. RedLock waits are not interrupted (they are bounded by their random pauses).
 * Thread-safe, but not async-signal-safe. NULL is a no-op. */
RLOCK_EXPORT void rlock_client_interrupt(rlock_client *client);

/* ---------------------------------------------------------------------------------------------
 * Owners and cancellation.
 *
 * An owner is an identity that holds locks instead of a thread: a hold taken with an owner may
 * be released, extended or queried from any thread, through any handle of the same lock, by
 * passing the same owner. Re-entry is counted per owner, and two owners exclude each other even
 * in one thread (a thread may hold a lock as one owner and wait for it as another). On Redis an
 * owner's hold looks like any other: the field "<client-uuid>:<n>", where n is never reused
 * within the client and never equals a thread's number, so Redisson and other clients see an
 * ordinary hold. Every lock type and both groups (multi-lock, RedLock) take owners, and the
 * watchdog renews an owner's watchdog holds as a thread's. After fork() the child forgets the
 * parent's owner holds as it forgets thread holds.
 * ------------------------------------------------------------------------------------------- */
typedef struct rlock_owner rlock_owner;

/* Creates an owner of client's locks. Returns RLOCK_OK, RLOCK_EINVAL (NULL argument),
 * RLOCK_ENOMEM or RLOCK_ECLOSED. */
RLOCK_EXPORT int rlock_owner_new(rlock_client *client, rlock_owner **out);

/* Frees an owner. It releases nothing: a hold it still has stays on Redis. A hold with an
 * explicit lease ends when its lease runs out; a watchdog hold stays renewed by the watchdog
 * until its handle is freed (rlock_free) or the client is (rlock_client_free), and then ends
 * within watchdog_timeout_ms. Unlock every hold first to let others in at once. NULL is a no-op;
 * the owner must not be in use by another call. */
RLOCK_EXPORT void rlock_owner_free(rlock_owner *owner);

/* The owner's field on Redis, "<client-uuid>:<n>"; valid as long as the owner; "" for NULL. */
RLOCK_EXPORT const char *rlock_owner_id(const rlock_owner *owner);

/* A cancellation token: firing it ends every wait that uses it, on any thread, with
 * RLOCK_ECANCELED. A token stays fired; a fired token passed to a new call ends that call at once,
 * before it sends any command. One token may serve many waits at once, of any client. */
typedef struct rlock_cancel rlock_cancel;

/* Creates an unfired token. RLOCK_OK, RLOCK_EINVAL (out NULL), RLOCK_ENOMEM, or RLOCK_ECONN when
 * the process is out of file descriptors (a token needs a shared pipe). */
RLOCK_EXPORT int rlock_cancel_new(rlock_cancel **out);

/* Fires the token: every wait using it returns RLOCK_ECANCELED within milliseconds, having left
 * every queue it joined and holding nothing (a grant that raced with the cancel is either
 * returned as RLOCK_OK or released first). Async-signal-safe (atomics and write(2) only), so a
 * signal handler may call it; idempotent. NULL is a no-op. */
RLOCK_EXPORT void rlock_cancel_fire(rlock_cancel *cancel);

/* 1 once the token was fired, else 0 (also for NULL). Async-signal-safe. */
RLOCK_EXPORT int rlock_cancel_fired(const rlock_cancel *cancel);

/* Frees a token. No wait may be using it. NULL is a no-op. */
RLOCK_EXPORT void rlock_cancel_free(rlock_cancel *cancel);

/* The arguments of rlock_lock_ex(); rlock_lock_args_init() sets the defaults. */
typedef struct rlock_lock_args {
    int64_t wait_ms;      /* as rlock_try_lock(); RLOCK_WAIT_FOREVER allowed (default) */
    int64_t lease_ms;     /* as rlock_try_lock(); default -1: the watchdog keeps the hold */
    rlock_owner *owner;   /* NULL = the calling thread, as rlock_lock() */
    rlock_cancel *cancel; /* NULL = not cancellable */
    /* Called once, from the watchdog thread, when this hold is lost (its lease ran out or its key
     * vanished while it was held), with the handle it was taken through; the client-wide on_lost
     * still fires too. It belongs to the hold, so a re-entry that passes another callback
     * replaces it. NULL = none. Only watchdog holds (lease_ms < 0) are watched. */
    void (*on_lost)(rlock *lock, void *user_data);
    void *user_data;
    void *reserved[4]; /* must be NULL */
} rlock_lock_args;

/* Defaults: wait forever, watchdog lease, the calling thread, no token, no callback. NULL is a
 * no-op. */
RLOCK_EXPORT void rlock_lock_args_init(rlock_lock_args *args);

/* rlock_try_lock() with an owner, a cancellation token and a per-hold loss callback. Returns
 * what rlock_try_lock() returns, and RLOCK_ECANCELED when args->cancel fired before the lock was
 * granted; RLOCK_EINVAL for NULL arguments, an owner of another client, or reserved fields that
 * are not NULL. With args->owner NULL and no token it is rlock_try_lock(). */
RLOCK_EXPORT int rlock_lock_ex(rlock *lock, const rlock_lock_args *args);

/* rlock_unlock() of owner's hold (NULL: the calling thread's), from any thread, through lock or
 * any other open handle of the same lock (same client, type and name) that took the hold; a
 * group's hold through its own handle. Calls for one owner must not overlap. */
RLOCK_EXPORT int rlock_unlock_ex(rlock *lock, rlock_owner *owner);

/* Makes the remaining lease of owner's hold (NULL: the calling thread's) at least lease_ms; it
 * never shortens a hold, and a watchdog hold stays under the watchdog. Written as any write is
 * (with replica_sync, acknowledged by the replicas or RLOCK_EREPLICA). Returns RLOCK_OK;
 * RLOCK_ENOTOWNER when the owner holds nothing through this handle; RLOCK_ELOST when the hold is
 * gone on Redis (the local record is dropped and the loss counts as reported; with replica_sync,
 * only when the replicas acknowledged that answer: otherwise RLOCK_EREPLICA and the record
 * stays, as for rlock_unlock()); RLOCK_EINVAL for lease_ms <= 0 or above RLOCK_MAX_DURATION_MS;
 * or a connection/Redis error. */
RLOCK_EXPORT int rlock_extend(rlock *lock, rlock_owner *owner, int64_t lease_ms);

/* 1 if owner (NULL: the calling thread) holds the lock (verified on Redis), 0 if not, or a
 * negative error. */
RLOCK_EXPORT int rlock_is_held_by(rlock *lock, rlock_owner *owner);

/* rlock_token() of owner's hold (NULL: the calling thread's): the fencing token of its grant, 0
 * when the owner holds nothing through this handle (or another open handle of the same lock), for
 * a multi-lock, or on bad input (a NULL lock, an owner of another client). A RedLock's is the
 * largest among its members' servers. It reads the client's own records and sends no command,
 * so it also serves a loop client's handles (rlock_async.h), on the loop's thread, once the
 * lock's done got RLOCK_OK. */
RLOCK_EXPORT uint64_t rlock_token_ex(rlock *lock, rlock_owner *owner);

/* Cancellable semaphore and latch waits: the calls without _ex plus a token (NULL: none, and then
 * exactly the call without it), with the same arguments and bounds (permits 1 .. 2^31-1 for
 * rlock_semaphore_acquire_ex(), lease_ms as rlock_semaphore_acquire_leased()). A token that fired
 * before the call returns RLOCK_ECANCELED at once, before any command (after the checks of bad
 * input, which still return RLOCK_EINVAL). Firing it during the wait ends the wait with
 * RLOCK_ECANCELED within milliseconds (one that fires while an attempt is on its way first waits
 * for the attempt's reply), and the waiter has left the semaphore's or latch's channel by then.
 * Permits that an attempt took as the token fired are never lost: the call returns RLOCK_OK with
 * them (the caller holds them and releases them as usual), or it gives them back before returning
 * RLOCK_ECANCELED (an attempt whose reply was lost is settled first, as a timed-out call is, so
 * such a call may take up to the settlement's command timeouts to return). A latch that opened as
 * the token fired may return RLOCK_OK. */
RLOCK_EXPORT int rlock_semaphore_acquire_ex(rlock_semaphore *sem, int64_t permits, int64_t wait_ms,
                                            rlock_cancel *cancel);
RLOCK_EXPORT int rlock_semaphore_acquire_leased_ex(rlock_semaphore *sem, int64_t wait_ms,
                                                   int64_t lease_ms, rlock_cancel *cancel,
                                                   char permit_id[RLOCK_PERMIT_ID_LEN + 1]);
RLOCK_EXPORT int rlock_latch_await_ex(rlock_latch *latch, int64_t wait_ms, rlock_cancel *cancel);

/* ---- Observability (docs/observability.md) ---------------------------------------------------
 * Every client counts and times what its locks, semaphores and latches do, always (a few relaxed
 * atomic additions per call, no lock, no allocation), and hands each observation as an event to a
 * hook the user may set. */

/* The kind an event or a metric label names: the lock kinds plus groups, semaphores and the
 * latch. A spin lock (RLOCK_SPIN) is labelled "reentrant": it is the reentrant lock's data and
 * excludes it on one name; only the way its waiters wait differs. */
typedef enum rlock_metric_kind {
    RLOCK_MK_REENTRANT = 0,        /* "reentrant" (also RLOCK_SPIN) */
    RLOCK_MK_FAIR = 1,             /* "fair" */
    RLOCK_MK_READ = 2,             /* "read" */
    RLOCK_MK_WRITE = 3,            /* "write" */
    RLOCK_MK_MULTI = 4,            /* "multi": a multi-lock group */
    RLOCK_MK_REDLOCK = 5,          /* "redlock": a RedLock group */
    RLOCK_MK_SEMAPHORE = 6,        /* "semaphore": plain permits (holds count permits) */
    RLOCK_MK_SEMAPHORE_LEASED = 7, /* "semaphore_leased": leased permits, one hold each */
    RLOCK_MK_LATCH = 8             /* "latch": an await counts as an acquire */
} rlock_metric_kind;

/* What an event reports. */
typedef enum rlock_event_type {
    RLOCK_EV_WAIT_BEGIN = 0,  /* an acquire call (lock, try_lock, acquire, await) starts */
    RLOCK_EV_ACQUIRED = 1,    /* it succeeded: wait_ns, token, hold_count */
    RLOCK_EV_WAIT_FAILED = 2, /* it failed: result (RLOCK_ETIMEDOUT, RLOCK_ECANCELED, ...) */
    RLOCK_EV_RELEASED = 3,    /* a full release (hold count back to 0): hold_ns, token */
    /* a hold was found gone (by the watchdog, or by the unlock or extend that met its absence),
     * reported once: hold_ns, token */
    RLOCK_EV_LOST = 4,
    RLOCK_EV_FAILOVER = 5, /* the client switched to another master: detail "host:port" */
    /* too few replicas acknowledged a write: result RLOCK_EREPLICA; kind -1 and no name for a
     * watchdog renewal */
    RLOCK_EV_REPLICA_SYNC_FAILED = 6
} rlock_event_type;

/* One observation. Pointers are valid during the hook's call only. Fields that do not apply to
 * a type are 0 or NULL (failovers carry no kind, name or owner: kind is then -1). */
typedef struct rlock_event {
    rlock_event_type type;
    int kind;           /* an rlock_metric_kind, or -1 */
    const char *name;   /* the lock's, semaphore's or latch's name (a group: its first member's) */
    const char *owner;  /* the owner string ("<client-uuid>:<thread-id>[:write]"), or NULL */
    int result;         /* RLOCK_OK or the RLOCK_E* code of a failed wait or sync */
    int64_t wait_ns;    /* ACQUIRED, WAIT_FAILED: time spent in the acquire call */
    int64_t hold_ns;    /* RELEASED, LOST: time since the acquisition that made the hold */
    uint64_t token;     /* fencing token of the hold (0 when the kind has none) */
    int hold_count;     /* ACQUIRED: the hold count after it (above 1: a re-entry) */
    const char *detail; /* FAILOVER: the new master as "host:port"; else NULL */
} rlock_event;

/* Sets (fn non-NULL) or removes (fn NULL) the client's event hook; user_data is passed back.
 * The hook runs on the thread that did the work (the caller's, or the watchdog's for LOST and
 * renewals, or the subscriber's for a failover it noticed), after the work, never with a mutex of
 * rlock held: it may call rlock (rlock_metrics_text(), another lock operation on the same client),
 * but it delays that thread's next step, so keep it short. Events already being delivered on
 * other threads may still reach the previous hook. NULL client: nothing happens (the thread's
 * last error says RLOCK_EINVAL). */
RLOCK_EXPORT void rlock_client_on_event(rlock_client *client,
                                        void (*fn)(const rlock_event *ev, void *user_data),
                                        void *user_data);

/* The client's figures since it was created, as OpenMetrics text (ending with "# EOF"; serve it
 * as "application/openmetrics-text; version=1.0.0"): the families listed in
 * docs/observability.md, every one present (0 where nothing happened). Returns RLOCK_OK and sets
 * *out (free it with rlock_metrics_free()); RLOCK_EINVAL for a NULL client or out; RLOCK_ENOMEM. */
RLOCK_EXPORT int rlock_metrics_text(rlock_client *client, char **out);
RLOCK_EXPORT void rlock_metrics_free(char *text);

/* Adds per-name figures for name (the rlock_name_* families, labelled with the name) from now
 * on: only watched names get them, so the label's cardinality is the caller's choice. Watching a
 * watched name again does nothing. At most 64 names a client. Returns RLOCK_OK; RLOCK_EINVAL for
 * a NULL client, a NULL, empty or over-long name (as rlock_open()), or a 65th name; RLOCK_ENOMEM;
 * RLOCK_ECLOSED. */
RLOCK_EXPORT int rlock_metrics_watch(rlock_client *client, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_H */
