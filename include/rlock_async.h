/*
 * rlock_async - locks driven by the caller's event loop, without threads.
 *
 * A loop client is an rlock_client created with rlock_loop_client_new() (or an adapter:
 * rlock/libuv.h). Its connections, wake-ups, timers and watchdog renewals are I/O and timers on
 * the caller's loop, through the callbacks of an rlock_loop; it starts no thread. Its handles are
 * the ordinary rlock_open() ones; it is freed with rlock_client_free(). Every call on a loop
 * client and its handles is made on the loop's thread (rlock_cancel_fire() excepted). A blocking
 * call on a loop client (rlock_lock, rlock_try_lock, rlock_unlock, rlock_lock_ex, ...) returns
 * RLOCK_EINVAL.
 *
 * This version: reentrant locks (RLOCK_REENTRANT), fair locks (RLOCK_FAIR: Redisson's queue; a
 * waiter keeps its place by a heartbeat on the loop's timer and leaves the queue when it gives
 * up, or when the client is freed), read-write locks (RLOCK_READ, RLOCK_WRITE: the threaded
 * lock's data and rules, a waiting writer recorded as on a threaded client, with its heartbeat
 * on the loop's timer), spin locks (RLOCK_SPIN: no subscription, a busy attempt made again on
 * the loop's timer after the threaded spin lock's back-off), semaphores and the latch on a
 * single Redis over TCP (redis://host:port, with a password and a db) or TLS (rediss://, with the
 * TLS options of rlock_client_new(): tls_ca_file, tls_cert_file, tls_key_file, tls_server_name,
 * tls_insecure; the handshake runs on the loop, and a refused one completes the operations waiting
 * for it with RLOCK_ETLS). The host is a numeric address or a name: a name is looked up by
 * getaddrinfo() on a helper thread that lives for that one lookup and hands the answer to the loop
 * through a socket the loop watches (the loop interface has no resolver); apart from these lookups
 * a loop client starts no thread. A lookup, dial and handshake together are bounded by
 * connect_timeout_ms. When dials of the data connection fail, the next one waits 50 ms, doubling up
 * to 2 s (reset once the server answers), and the requests before it fail at once with RLOCK_ECONN.
 *
 * Sentinel (redis-sentinel://, rediss-sentinel://): from the creation on, the client asks each
 * Sentinel in turn for the master (SENTINEL get-master-addr-by-name) and checks with ROLE that
 * the node named is a master, on the loop; requests made meanwhile wait for it (within
 * connect_timeout_ms), and when no Sentinel names a reachable master they complete with
 * RLOCK_ECONN (and for 200 ms after that, a new call returns RLOCK_ECONN at once). The client
 * subscribes to +switch-master on one Sentinel (the next one when that connection breaks). When the
 * master changes (announced, or found by asking again after a broken data connection or a READONLY
 * reply), the data and pub/sub connections move to the new master: the requests in flight on the
 * old one complete with RLOCK_ECONN (they are not retried), as does a script a replica answers
 * READONLY (or LOADING, MASTERDOWN); waiters subscribe again there and keep waiting, holds are
 * renewed there; each switch counts in rlock_failovers_total and raises RLOCK_EV_FAILOVER, as on
 * a threaded client.
 *
 * A unix:// URL (unix://[[user]:password@]/path[?db=N], as for a threaded client) is served: the
 * socket is dialled without waiting, with no TLS; a unix socket refuses a dial at once, so a
 * path nobody listens on fails rlock_loop_client_new() with RLOCK_ECONN, and a server that
 * goes away later fails the requests with RLOCK_ECONN until a redial succeeds.
 *
 * Groups: rlock_lock_async() and rlock_unlock_async() take a multi-lock (rlock_multi_new()) or a
 * RedLock (rlock_redlock_new()) whose members are locks of any single-name kind (RedLock:
 * reentrant, one client each) of loop clients on one loop, with the threaded groups' semantics
 * (rlock.h): the multi-lock takes its members in order, waits for a busy member holding none of the
 * others and gives back what a failed round took; RedLock asks every server at once and holds with
 * a majority and validity left (the least lease less the elapsed time and a drift of 1% + 2 ms),
 * else gives back its grants and tries again after a random pause. Each member's hold is its
 * client's, renewed by that client's watchdog. The owner may be of any member's client. A fired
 * token ends the group's wait at once (a member's wait, or the pause between rounds); what the
 * group took is released before done gets RLOCK_ECANCELED, as before RLOCK_ECLOSED when a
 * member's client is freed. A RedLock attempt is decided once every server answered or the
 * members' redlock_server_timeout_ms passed: a server that did not answer by then counts as
 * failed, and a grant it makes later is given back.
 *
 * Fencing tokens: rlock_token_ex(lock, owner) (rlock.h) reads the token of owner's hold from the
 * client's records, with no command, on the loop's thread; a RedLock's is the largest of its
 * servers', as on threaded clients.
 *
 * Cluster (redis-cluster://, rediss-cluster://) is served in each cluster_pubsub mode, as on a
 * threaded client. The slot map is read on the loop from the seeds in turn (CLUSTER SLOTS) and,
 * in RLOCK_CLUSTER_PUBSUB_AUTO (the default), the pub/sub mode is probed on the same node with
 * PUBSUB SHARDNUMSUB (sharded on Redis >= 7, classic when refused); requests made meanwhile
 * wait for both, and when no seed gives a map they complete with RLOCK_ECONN naming each seed's
 * failure (a new read waits 50 ms, doubling to 2 s). Each request goes to the master of its
 * key's slot, on a connection of its own per master; MOVED updates the map and resends there,
 * ASK sends ASKING and the request to the node named. With replica_sync, the WAIT goes to the
 * master that ran the script and counts its own replicas. In classic pub/sub the client
 * subscribes on one node (a classic PUBLISH reaches every node). In sharded pub/sub its scripts
 * publish with SPUBLISH and it keeps a pub/sub connection per master, subscribing each channel
 * with SSUBSCRIBE on its slot's master; when the slot moves (the server drops the channel, or a
 * MOVED names the new owner) the channel is subscribed on the new owner and its waiters attempt
 * once after the confirmation, so a release meanwhile is not missed. Threaded clients and
 * Redisson sharing the names must use the same pub/sub mode, or their wake-ups are not heard.

 */
#ifndef RLOCK_ASYNC_H
#define RLOCK_ASYNC_H

#include "rlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Events of a watched file descriptor. */
#define RLOCK_LOOP_READ  1
#define RLOCK_LOOP_WRITE 2

/* Called by the loop when fd is ready: events is what is ready (RLOCK_LOOP_*). */
typedef void (*rlock_loop_io_fn)(void *arg, int events);
/* Called by the loop when a started timer expires. */
typedef void (*rlock_loop_timer_fn)(void *arg);

/* The loop interface: how a client asks the caller's loop for I/O readiness and timers. The
 * caller (or an adapter) fills it; the client copies it. Watchers and timers are created and
 * freed by the client, which frees all of its own in rlock_client_free(); after io_free or
 * timer_free returns, their callbacks must not be called any more. All calls come from the
 * loop's thread. loop_data is passed to the constructors as it is. */
typedef struct rlock_loop {
    void *loop_data;
    /* A watcher of fd, watching nothing yet; NULL on failure. */
    void *(*io_new)(void *loop_data, int fd, rlock_loop_io_fn cb, void *arg);
    /* Watch events (RLOCK_LOOP_READ | RLOCK_LOOP_WRITE), 0 = none. 0 on success. */
    int (*io_set)(void *io, int events);
    void (*io_free)(void *io);
    /* A stopped one-shot timer; NULL on failure. */
    void *(*timer_new)(void *loop_data, rlock_loop_timer_fn cb, void *arg);
    /* (Re)starts the timer: it fires once, delay_ms from now (0: at the loop's next turn). 0 on
     * success. */
    int (*timer_start)(void *timer, int64_t delay_ms);
    void (*timer_stop)(void *timer);
    void (*timer_free)(void *timer);
} rlock_loop;

/* Creates a loop client: options as rlock_client_new() (opts NULL: the defaults), the loop
 * interface (every callback set, else RLOCK_EINVAL). It returns at once: the connections are
 * dialled on the loop, and operations started before they are up wait for them. Returns
 * RLOCK_OK; RLOCK_EINVAL for a NULL out or loop, a missing callback, bad options (a TLS file that
 * cannot be read included), or a URL this version does not serve (see above); RLOCK_ETLS (no TLS
 * context could be built); RLOCK_ENOMEM; RLOCK_ECONN when no socket could be made (or every
 * numeric address, or the unix socket, refused the dial at once). */
RLOCK_EXPORT int rlock_loop_client_new(const rlock_options *opts, const rlock_loop *loop,
                                       rlock_client **out);

/* Called once when an asynchronous operation ends, on the loop, never inside the *_async call
 * that started it. rc: RLOCK_OK or a negative RLOCK_E* code. It may start other operations,
 * free the handle it is given (when no other operation of that handle is pending) or free the
 * client. */
typedef void (*rlock_done_fn)(rlock *lock, int rc, void *user_data);

/* Starts acquiring lock for args->owner (required: RLOCK_EINVAL without one; a loop has no
 * thread identity), with args->wait_ms, args->lease_ms (< 0: the client's watchdog renews the
 * hold on the loop's timer) and args->cancel. Returns RLOCK_OK when started: done then runs
 * exactly once with RLOCK_OK (acquired, or re-entered by the owner; a read hold inside the
 * owner's write hold too), RLOCK_ETIMEDOUT, RLOCK_EDEADLK (the write side asked by an owner that
 * holds the read side), RLOCK_ECANCELED (the token fired before the lock was granted; the
 * waiter has left its channel, and a fair lock's queue or the waiting writers, first; an attempt
 * already on its way is waited for, and if it was granted, done gets RLOCK_OK: nothing is ever held
 * unreported), RLOCK_ECLOSED (the client was freed first), RLOCK_ECONN, RLOCK_ETLS (the TLS
 * handshake was refused: an unknown CA, an expired certificate, a name mismatch), RLOCK_EAUTH (AUTH
 * or SELECT refused when the connection was made) or RLOCK_EREDIS. Returns a negative code without
 * calling done: RLOCK_EINVAL (NULL lock, args or done, no owner, an owner of another client, a
 * threaded client, bad durations, reserved fields set; a group with a member on a threaded
 * client or on another loop, or an owner of none of its members' clients), RLOCK_ECANCELED (the
 * token had fired already), RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_ECONN (no socket could be made, or
 * the back-off after failed dials is running). The lock handle and the owner must stay open until
 * done ran. args->on_lost is the hold's own loss callback, as for rlock_lock_ex(): when the
 * watchdog finds a hold taken with lease_ms < 0 gone, the client-wide on_lost runs and then this
 * one, once, on the loop, with the handle the hold was taken through (which must then stay open
 * while the hold lasts); a re-entry that passes another callback replaces it, one that passes none
 * keeps it, and the hold's full release forgets it. A group's is called with the group handle,
 * once: a multi-lock's when its first member's hold is found gone, a RedLock's once fewer than a
 * majority of its servers keep the hold (as on threaded clients); the group's release, or its
 * handle's free, forgets it. A reentrant lock's waiter is recorded among the lock's waiters and
 * may be granted the lock by a release (docs/event-loops.md; not in sharded cluster pub/sub,
 * which has no patterns): done then
 * gets RLOCK_OK with the release's token and no command of the waiter's own; a grant racing
 * the token or the deadline is reported RLOCK_OK or released. */
RLOCK_EXPORT int rlock_lock_async(rlock *lock, const rlock_lock_args *args, rlock_done_fn done,
                                  void *user_data);

/* Releases one hold of owner's (required) on lock (of a read-write lock: on the handle's side).
 * done gets RLOCK_OK (released, fully or one re-entry), RLOCK_ENOTOWNER (the owner holds nothing on
 * Redis), RLOCK_ELOST (the watchdog had found the hold gone; the on_lost callbacks were called
 * then, on the loop), RLOCK_EREPLICA (with replica_sync: a "not held" from a master whose
 * replicas did not acknowledge it; the outcome is unknown, the hold stays recorded and renewed,
 * retry), RLOCK_ECLOSED, RLOCK_ECONN, RLOCK_ETLS or RLOCK_EREDIS. A group releases every member
 * and answers once all did (a member whose client was freed answers RLOCK_ECLOSED, the others
 * are still released): RLOCK_OK when every member (RedLock: a majority) released,
 * RLOCK_ENOTOWNER when none was held, else a multi-lock's first member error or RedLock's
 * RLOCK_ELOST. Returns RLOCK_OK when started, else a negative code (RLOCK_EINVAL, RLOCK_ECLOSED,
 * RLOCK_ENOMEM, RLOCK_ECONN) and done never runs. */
RLOCK_EXPORT int rlock_unlock_async(rlock *lock, rlock_owner *owner, rlock_done_fn done,
                                    void *user_data);

/* ---- semaphores and the latch ----------------------------------------------------------
 *
 * The handles are the ordinary rlock_semaphore_open() / rlock_latch_open() ones of a loop
 * client; the data on Redis and the channels are the blocking calls' (Redisson's), so loop
 * clients, threaded clients and Redisson share a semaphore or a latch. These calls take no
 * owner: permits and counts belong to nobody (a leased permit is named by its id), as in the
 * blocking calls. Each call follows the rules of rlock_lock_async(): RLOCK_OK when started and
 * then done runs exactly once on the loop, never inside the call; a negative code and done never
 * runs. Bad input is RLOCK_EINVAL: a NULL handle or done, a handle of a threaded client, permits
 * < 1 or above INT32_MAX, wait_ms < 0, lease_ms out of range. RLOCK_ECANCELED when the token had
 * fired already, RLOCK_ECLOSED for a freed client, RLOCK_ENOMEM, RLOCK_ECONN (no socket). The
 * handle must stay open until done ran. done may get RLOCK_ECLOSED (the client was freed first),
 * RLOCK_ECONN (the connection broke or a reply came later than command_timeout_ms) or
 * RLOCK_EREDIS. An acquire whose reply was lost is settled on Redis before done runs, as the
 * blocking acquire is: permits its attempt took are kept and reported (RLOCK_OK), or the call is
 * cancelled there; a release or count-down whose reply was lost (RLOCK_ECONN) may have run. */

/* The end of a semaphore operation (rc RLOCK_OK or a negative RLOCK_E* code). */
typedef void (*rlock_semaphore_done_fn)(rlock_semaphore *sem, int rc, void *user_data);
/* The end of a leased acquire: with rc RLOCK_OK, permit_id is the permit's id (32 hex digits,
 * valid during the call: copy it), else NULL. */
typedef void (*rlock_semaphore_leased_done_fn)(rlock_semaphore *sem, int rc, const char *permit_id,
                                               void *user_data);
/* The end of a latch operation. */
typedef void (*rlock_latch_done_fn)(rlock_latch *latch, int rc, void *user_data);

/* Takes permits plain permits as rlock_semaphore_acquire_ex() (wait_ms 0: one attempt,
 * RLOCK_WAIT_FOREVER or above RLOCK_MAX_DURATION_MS: no limit; cancel may be NULL). The waiter
 * listens on the semaphore's channel (redisson_sc:{name}) and attempts again at each release
 * message, when the earliest leased permit runs out, and at least every
 * subscription_timeout_ms. done gets RLOCK_OK (taken), RLOCK_ETIMEDOUT, or RLOCK_ECANCELED: the
 * token fired while no attempt was on its way, and no permit was taken; an attempt on its way is
 * waited for, and if it took the permits done gets RLOCK_OK (the caller holds them). */
RLOCK_EXPORT int rlock_semaphore_acquire_async(rlock_semaphore *sem, int64_t permits,
                                               int64_t wait_ms, rlock_cancel *cancel,
                                               rlock_semaphore_done_fn done, void *user_data);

/* Takes one leased permit as rlock_semaphore_acquire_leased_ex(), waiting as
 * rlock_semaphore_acquire_async(). lease_ms in 1 .. RLOCK_MAX_DURATION_MS: the permit comes back
 * by itself when its lease runs out. lease_ms < 0: the client's watchdog keeps a lease of
 * watchdog_timeout_ms renewed on the loop's timer until the permit is released (through
 * rlock_semaphore_release_leased_async() on this client) or its lease is updated, or the client
 * is freed (freeing the handle does not stop it on a loop client); a permit found gone is
 * reported to the client's on_lost, on the loop, with the semaphore's name, and its release then
 * gets RLOCK_ELOST. lease_ms 0 or above RLOCK_MAX_DURATION_MS: RLOCK_EINVAL. done gets the
 * permit's id with RLOCK_OK. */
RLOCK_EXPORT int rlock_semaphore_acquire_leased_async(rlock_semaphore *sem, int64_t wait_ms,
                                                      int64_t lease_ms, rlock_cancel *cancel,
                                                      rlock_semaphore_leased_done_fn done,
                                                      void *user_data);

/* Returns permits plain permits as rlock_semaphore_release() (waking waiters of every client).
 * done gets RLOCK_OK, RLOCK_ECONN, RLOCK_ECLOSED or RLOCK_EREDIS. */
RLOCK_EXPORT int rlock_semaphore_release_async(rlock_semaphore *sem, int64_t permits,
                                               rlock_semaphore_done_fn done, void *user_data);

/* Returns the leased permit permit_id (32 hex digits, else RLOCK_EINVAL) as
 * rlock_semaphore_release_leased(): done gets RLOCK_OK, RLOCK_ENOTOWNER when no such permit
 * is held (released already, or its lease ran out), or RLOCK_ELOST when this client's watchdog
 * had found its renewed permit gone. A renewed permit stops being renewed at this call. */
RLOCK_EXPORT int rlock_semaphore_release_leased_async(rlock_semaphore *sem, const char *permit_id,
                                                      rlock_semaphore_done_fn done,
                                                      void *user_data);

/* Waits until the latch's count is 0 as rlock_latch_await_ex() (wait_ms and cancel as
 * rlock_semaphore_acquire_async()): done gets RLOCK_OK (the count is 0; after the first read
 * when it was 0 already), RLOCK_ETIMEDOUT or RLOCK_ECANCELED. The waiter listens on the latch's
 * channel (redisson_countdownlatch__channel__{name}) and reads the count again at each message and
 * at least every subscription_timeout_ms. */
RLOCK_EXPORT int rlock_latch_await_async(rlock_latch *latch, int64_t wait_ms, rlock_cancel *cancel,
                                         rlock_latch_done_fn done, void *user_data);

/* Counts the latch down by one as rlock_latch_count_down(); reaching 0 wakes the awaiters of
 * every client. done gets RLOCK_OK, RLOCK_ECONN, RLOCK_ECLOSED or RLOCK_EREDIS. */
RLOCK_EXPORT int rlock_latch_count_down_async(rlock_latch *latch, rlock_latch_done_fn done,
                                              void *user_data);

/* ---- the other semaphore and latch calls -----------------------------------------------
 *
 * Each is the blocking call of the same name sent on the loop: same bounds (RLOCK_EINVAL for
 * the blocking call's bad input, nothing sent), same script and data, same result, handed to
 * done with the rules above. A call whose result is a number gets it in value (valid with
 * RLOCK_OK, else 0). A write whose reply was lost gets RLOCK_ECONN and may have run, at most
 * once (the blocking calls resend it; these do not). */

/* The end of a semaphore call with a number: the blocking call's non-negative result. */
typedef void (*rlock_semaphore_value_fn)(rlock_semaphore *sem, int rc, int64_t value,
                                         void *user_data);
/* The end of a latch call with a number. */
typedef void (*rlock_latch_value_fn)(rlock_latch *latch, int rc, int64_t value, void *user_data);

/* rlock_semaphore_try_set_permits(): value 1 set, 0 it was set already. */
RLOCK_EXPORT int rlock_semaphore_try_set_permits_async(rlock_semaphore *sem, int64_t permits,
                                                       rlock_semaphore_value_fn done,
                                                       void *user_data);
/* rlock_semaphore_try_set_permits_ttl(): value 1 set, 0 it was set already. */
RLOCK_EXPORT int rlock_semaphore_try_set_permits_ttl_async(rlock_semaphore *sem, int64_t permits,
                                                           int64_t ttl_ms,
                                                           rlock_semaphore_value_fn done,
                                                           void *user_data);
/* rlock_semaphore_add_permits(). */
RLOCK_EXPORT int rlock_semaphore_add_permits_async(rlock_semaphore *sem, int64_t delta,
                                                   rlock_semaphore_done_fn done, void *user_data);
/* rlock_semaphore_available(): value the permits available. */
RLOCK_EXPORT int rlock_semaphore_available_async(rlock_semaphore *sem,
                                                 rlock_semaphore_value_fn done, void *user_data);
/* rlock_semaphore_drain(): value the permits taken. */
RLOCK_EXPORT int rlock_semaphore_drain_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                             void *user_data);
/* rlock_semaphore_set_permits(). */
RLOCK_EXPORT int rlock_semaphore_set_permits_async(rlock_semaphore *sem, int64_t permits,
                                                   rlock_semaphore_done_fn done, void *user_data);
/* rlock_semaphore_release_if_exists(): value 1 released, 0 the semaphore was never set. */
RLOCK_EXPORT int rlock_semaphore_release_if_exists_async(rlock_semaphore *sem, int64_t permits,
                                                         rlock_semaphore_value_fn done,
                                                         void *user_data);
/* rlock_semaphore_permits(): value the total permits. */
RLOCK_EXPORT int rlock_semaphore_permits_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                               void *user_data);
/* rlock_semaphore_acquired(): value the leased permits held. */
RLOCK_EXPORT int rlock_semaphore_acquired_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                                void *user_data);
/* rlock_semaphore_update_lease(): RLOCK_OK or RLOCK_ENOTOWNER; a permit this client's watchdog
 * renews stops being renewed. */
RLOCK_EXPORT int rlock_semaphore_update_lease_async(rlock_semaphore *sem, const char *permit_id,
                                                    int64_t lease_ms, rlock_semaphore_done_fn done,
                                                    void *user_data);
/* rlock_semaphore_remaining_lease_ms(): value the ms left (-1: a permit without expiry), or
 * RLOCK_ENOTOWNER. */
RLOCK_EXPORT int rlock_semaphore_remaining_lease_ms_async(rlock_semaphore *sem,
                                                          const char *permit_id,
                                                          rlock_semaphore_value_fn done,
                                                          void *user_data);
/* The end of a leased acquire of several permits: with rc RLOCK_OK, permit_ids[0 .. count-1]
 * are their ids (32 hex digits each, valid during the call: copy them), else NULL and 0. */
typedef void (*rlock_semaphore_leased_n_done_fn)(rlock_semaphore *sem, int rc,
                                                 const char *const *permit_ids, size_t count,
                                                 void *user_data);
/* rlock_semaphore_acquire_leased_n(): permits (1 .. RLOCK_PERMIT_IDS_MAX) leased permits at once,
 * all or none, waiting and leased as rlock_semaphore_acquire_leased_async() (lease_ms < 0: each
 * is renewed by the watchdog and released on its own). */
RLOCK_EXPORT int rlock_semaphore_acquire_leased_n_async(rlock_semaphore *sem, int64_t permits,
                                                        int64_t wait_ms, int64_t lease_ms,
                                                        rlock_cancel *cancel,
                                                        rlock_semaphore_leased_n_done_fn done,
                                                        void *user_data);
/* rlock_semaphore_release_leased_n(): each id (all checked first: RLOCK_EINVAL) released as by
 * rlock_semaphore_release_leased_async(), one after the other; value how many were released (an
 * id no longer held, or lost, counts as not released). Another error ends it, the ids before
 * the failing one released. The ids are copied. */
RLOCK_EXPORT int rlock_semaphore_release_leased_n_async(rlock_semaphore *sem,
                                                        const char *const *permit_ids, size_t count,
                                                        rlock_semaphore_value_fn done,
                                                        void *user_data);
/* rlock_latch_try_set_count(): value 1 set, 0 already counting. */
RLOCK_EXPORT int rlock_latch_try_set_count_async(rlock_latch *latch, int64_t count,
                                                 rlock_latch_value_fn done, void *user_data);
/* rlock_latch_count(): value the count. */
RLOCK_EXPORT int rlock_latch_count_async(rlock_latch *latch, rlock_latch_value_fn done,
                                         void *user_data);
/* rlock_latch_delete(): value 1 deleted, 0 the latch was not counting. */
RLOCK_EXPORT int rlock_latch_delete_async(rlock_latch *latch, rlock_latch_value_fn done,
                                          void *user_data);

#ifdef __cplusplus
}
#endif

#endif
