/*
 * Lock handles, per-thread hold records, the public entry points, and the acquire and release
 * of every single-key lock type around them (the wait between attempts is lock_wait.c's).
 *
 * A hold record belongs to one (handle, thread). Only its thread changes count, token and
 * lease; the watchdog only sets `lost`. Records are linked in the handle under its mutex, which
 * is never held across Redis I/O or a watchdog cancel.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "hold_index.h"
#include "lock.h"
#include "lock_lost.h"
#include "lock_observe.h"
#include "lock_wait.h"
#include "replica.h"
#include "scripts.h"

static size_t hash_field_of(const rlock *l, const char *owner, size_t owner_len, char *out);

/* ---- handles ----------------------------------------------------------------------------- */

/* The name lives in the same allocation as the handle: one malloc per handle keeps a held lock
 * within its memory budget (see the benchmark's bytes-per-held-lock figure). */
static rlock *handle_alloc_named(const rlk_lock_ops *ops, const char *name, size_t len)
{
    rlock *l = calloc(1, sizeof(*l) + len + 1);
    if (l == NULL) {
        rlk_err(RLOCK_ENOMEM, "cannot allocate a lock handle (name of %zu bytes)", len);
        return NULL;
    }
    l->ops = ops;
    memcpy(l->name, name, len);
    l->name_len = (uint32_t)len;
    atomic_init(&l->gen, (unsigned short)rlk_fork_gen());
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

/* In the child of a fork(), forgets the hold records the handle inherited: the holds are the
 * parent's (another owner on Redis), and their watchdog entries sat in the parent's watchdog,
 * which the child abandoned, so they are freed without a cancel. The mutex is initialized again:
 * a parent thread may have held it at the fork. That thread only ever changed the list with
 * single pointer stores (link, unlink; records are freed after the unlock), so the list read here
 * is whole; a record it was unlinking is merely not freed in the child. Every use of the mutex
 * comes through here first, so no thread of the child holds it now. */
void rlk_handle_refresh(rlock *l)
{
    unsigned short now = (unsigned short)rlk_fork_gen();
    if (atomic_load_explicit(&l->gen, memory_order_acquire) == now) {
        return;
    }
    rlk_fork_lock();
    if (atomic_load_explicit(&l->gen, memory_order_relaxed) != now) {
        pthread_mutex_init(&l->mu, NULL);
        while (l->holds != NULL) {
            rlk_hold *h = l->holds;
            l->holds = h->next;
            free(h);
        }
        while (l->cbs != NULL) { /* the parent's holds' callbacks */
            rlk_hold_cb *cb = l->cbs;
            l->cbs = cb->next;
            free(cb);
        }
        atomic_store_explicit(&l->gen, now, memory_order_release);
    }
    rlk_fork_unlock();
}

rlock *rlk_handle_alloc(const rlk_lock_ops *ops)
{
    return handle_alloc_named(ops, "", 0);
}

rlock *rlk_single_new(rlock_client *c, rlock_kind kind, const char *name, const rlk_lock_ops *ops,
                      const rlk_single_ops *single)
{
    rlock *l = handle_alloc_named(ops, name, strlen(name));
    if (l == NULL) {
        return NULL;
    }
    l->single = single;
    l->kind = (uint16_t)kind;
    l->client = c;
    rlk_client_ref(c);
    return l;
}

RLOCK_EXPORT void rlock_free(rlock *lock)
{
    if (lock == NULL) {
        return;
    }
    if (lock->ops->destroy != NULL) {
        lock->ops->destroy(lock);
    }
    rlk_hold_cb_free_all(lock);
    if (!lock->ops->group) {
        rlk_client_unref(lock->client);
    }
    pthread_mutex_destroy(&lock->mu);
    free(lock);
}

/* ---- public entry points ----------------------------------------------------------------- */

static int check_handle(rlock *l)
{
    if (l == NULL) {
        return rlk_err(RLOCK_EINVAL, "lock must not be NULL");
    }
    /* A group has no client of its own: each member call checks its member's. */
    if (l->ops->group) {
        return RLOCK_OK;
    }
    int r = rlk_client_enter(l->client);
    return r ? r : rlk_client_blocking(l->client, "a blocking lock call");
}

/* l->ops->acquire() observed as one acquire call (begin, end, and the start of the hold it made).
 * A group's member calls inside the group's call are not observed: the group is. */
static int acquire_observed(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (rlk_obs_in_group()) {
        return l->ops->acquire(l, wait_ms, lease_ms);
    }
    rlk_obs_target t;
    rlk_obs_target_of(l, rlk_thread_id(), &t);
    rlk_obs_wait w;
    rlk_obs_acquire_begin(t.client, &w, t.kind, t.name, t.owner);
    rlk_obs_group_set(l->ops->group);
    int r = l->ops->acquire(l, wait_ms, lease_ms);
    rlk_obs_group_set(0);
    int count = 0;
    uint64_t token = 0;
    rlk_hold *h = r == RLOCK_OK ? rlk_hold_get(l, rlk_thread_id(), 0) : NULL;
    if (h != NULL) {
        count = h->count;
        token = h->token;
        if (count == 1) {
            atomic_store_explicit(&h->obs_t0, rlk_obs_now_ns(), memory_order_relaxed);
        }
    }
    return rlk_obs_acquire_end(t.client, &w, t.name, t.owner, r, token, count);
}

/* l->ops->unlock(), a group's member calls inside it unobserved (a full release reports itself
 * through rlk_hold_obs_end()). */
static int unlock_observed(rlock *l)
{
    int was = rlk_obs_group_set(rlk_obs_in_group() || l->ops->group);
    int r = l->ops->unlock(l);
    rlk_obs_group_set(was);
    return r;
}

static int check_lease(int64_t lease_ms)
{
    if (lease_ms == 0 || lease_ms > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "lease_ms must be < 0 (watchdog) or in [1, %lld], got %lld",
                       (long long)RLOCK_MAX_DURATION_MS, (long long)lease_ms);
    }
    return RLOCK_OK;
}

RLOCK_EXPORT int rlock_lock(rlock *lock, int64_t lease_ms)
{
    int r = check_handle(lock);
    r = r ? r : check_lease(lease_ms);
    return r ? r : acquire_observed(lock, -1, lease_ms < 0 ? -1 : lease_ms);
}

RLOCK_EXPORT int rlock_try_lock(rlock *lock, int64_t wait_ms, int64_t lease_ms)
{
    int r = check_handle(lock);
    r = r ? r : check_lease(lease_ms);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    /* Waits beyond the cap mean "no limit", so deadline arithmetic can never overflow. */
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    return acquire_observed(lock, wait, lease_ms < 0 ? -1 : lease_ms);
}

#define RLK_DISPATCH(lock, fn, ...)                                                                \
    do {                                                                                           \
        int r_ = check_handle(lock);                                                               \
        if (r_ != RLOCK_OK) {                                                                      \
            return r_;                                                                             \
        }                                                                                          \
        return (lock)->ops->fn(__VA_ARGS__);                                                       \
    } while (0)

RLOCK_EXPORT int rlock_unlock(rlock *lock)
{
    int r = check_handle(lock);
    return r != RLOCK_OK ? r : unlock_observed(lock);
}

RLOCK_EXPORT int rlock_force_unlock(rlock *lock)
{
    RLK_DISPATCH(lock, force_unlock, lock);
}

RLOCK_EXPORT int rlock_is_locked(rlock *lock)
{
    RLK_DISPATCH(lock, is_locked, lock);
}

RLOCK_EXPORT int rlock_is_held(rlock *lock)
{
    RLK_DISPATCH(lock, is_held, lock);
}

RLOCK_EXPORT int rlock_hold_count(rlock *lock)
{
    RLK_DISPATCH(lock, hold_count, lock);
}

RLOCK_EXPORT int64_t rlock_remaining_ttl_ms(rlock *lock)
{
    int r = check_handle(lock);
    return r != RLOCK_OK ? RLOCK_TTL_ERROR(r) : lock->ops->ttl(lock);
}

RLOCK_EXPORT uint64_t rlock_token(rlock *lock)
{
    return check_handle(lock) != RLOCK_OK ? 0 : lock->ops->token(lock);
}

/* ---- hold records ------------------------------------------------------------------------ */

rlk_hold *rlk_hold_get(rlock *l, uint64_t tid, int create)
{
    rlk_handle_refresh(l);
    pthread_mutex_lock(&l->mu);
    rlk_hold *h = l->holds;
    while (h != NULL && h->tid != tid) {
        h = h->next;
    }
    if (h == NULL && create) {
        assert(l->ops->hold_size == 0 || l->ops->hold_size >= sizeof(*h));
        h = calloc(1, l->ops->hold_size > 0 ? l->ops->hold_size : sizeof(*h));
        if (h != NULL) {
            h->lock = l;
            h->tid = tid;
            atomic_init(&h->lost, 0);
            rlk_wd_entry_init(&h->wd, l->single != NULL ? l->single->renew : NULL);
            h->next = l->holds;
            l->holds = h;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (h != NULL && create && tid >= RLK_OWNER_TID_BASE && h->count == 0) {
        rlk_hold_index_remove(l, tid); /* at most one entry per record */
        rlk_hold_index_add(l, tid);
    }
    return h;
}

/* Stops the hold's renewal (a no-op when it has none: only single-key types register the
 * record's own entry). Never called with l->mu held: the cancel may wait for an in-flight batch. */
static void hold_stop_renewal(rlock *l, rlk_hold *h)
{
    if (l->single != NULL) {
        rlk_wd_cancel(l->client->watchdog, &h->wd);
    }
}

static void hold_forget(rlock *l, rlk_hold *h)
{
    /* A hold dropped on a path that reported no release or loss still leaves the holds gauge. */
    rlk_hold_obs_end(l, h, RLK_HOLD_FORGOTTEN);
    hold_stop_renewal(l, h);
    pthread_mutex_lock(&l->mu);
    rlk_hold **pp = &l->holds;
    while (*pp != NULL && *pp != h) {
        pp = &(*pp)->next;
    }
    if (*pp == h) {
        *pp = h->next;
    }
    rlk_hold_cb_drop_locked(l, h->tid);
    pthread_mutex_unlock(&l->mu);
    rlk_hold_index_remove(l, h->tid);
    free(h);
}

void rlk_hold_drop_if_empty(rlock *l, rlk_hold *h)
{
    if (h != NULL && h->count == 0) {
        hold_forget(l, h);
    }
}

void rlk_hold_forget_all(rlock *l)
{
    rlk_handle_refresh(l);
    while (l->holds != NULL) {
        hold_forget(l, l->holds);
    }
}

int rlk_hold_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    rlk_hold *h = RLK_CONTAINER_OF(e, rlk_hold, wd);
    rlock *l = h->lock;
    char owner[RLK_OWNER_MAX];
    char f[RLK_OWNER_MAX];
    size_t n = rlk_owner(l->client, h->tid, owner);
    n = hash_field_of(l, owner, n, f);
    int r = rlk_buf_append(key, l->name, l->name_len);
    return r ? r : rlk_buf_append(field, f, n);
}

void rlk_hold_on_lost(rlk_wd_entry *e)
{
    rlk_hold *h = RLK_CONTAINER_OF(e, rlk_hold, wd);
    atomic_store(&h->lost, 1);
    rlk_hold_obs_end(h->lock, h, RLK_HOLD_LOST);
    rlk_log(h->lock->client, RLOCK_LOG_WARN,
            "lost the hold of thread %llu on lock '%s': its lease ran out",
            (unsigned long long)h->tid, h->lock->name);
    rlk_notify_lost(h->lock);
    rlk_hold_cb_fire(h->lock, h->tid);
}

void rlk_notify_lost(const rlock *l)
{
    const rlock_options *o = &l->client->opts;
    if (o->on_lost != NULL) {
        o->on_lost(l->name, o->user_data);
    }
}

/* ---- acquire ----------------------------------------------------------------------------- */

static int settle_grant(rlk_acq *a, rlk_hold *h);

/* Writes the lock-hash field of owner for l into out (RLK_OWNER_MAX bytes); returns its length. */
static size_t hash_field_of(const rlock *l, const char *owner, size_t owner_len, char *out)
{
    if (l->single != NULL && l->single->hash_field != NULL) {
        return l->single->hash_field(owner, owner_len, out);
    }
    memcpy(out, owner, owner_len);
    out[owner_len] = '\0';
    return owner_len;
}

/* The renewal a hold granted by a release needs (a->granted_ttl > 0): the grant gave the grant
 * TTL only, so a longer lease is renewed within a third of it, by the watchdog for good (watchdog
 * holds) or once (explicit leases). Neither delays the caller (watchdog.h, rlk_wd_add_soon). */
static int grant_extend(rlk_acq *a, rlk_hold *h, int watchdog)
{
    rlock_client *c = a->lock->client;
    if (watchdog) {
        return rlk_wd_add_soon(c->watchdog, &h->wd, c->opts.watchdog_timeout_ms, a->granted_ttl);
    }
    if (a->lease_ms > a->granted_ttl && !rlk_wd_active(c->watchdog, &h->wd)) {
        return rlk_wd_add_once(c->watchdog, &h->wd, a->lease_ms, a->granted_ttl);
    }
    return RLOCK_OK;
}

void rlk_acq_init(rlk_acq *a, rlock *l)
{
    memset(a, 0, sizeof(*a));
    a->lock = l;
    a->client = l->client;
    a->tid = rlk_thread_id();
    a->owner_len = rlk_owner(l->client, a->tid, a->owner);
    a->field_len = hash_field_of(l, a->owner, a->owner_len, a->field);
    a->ttl_ms = -1;
    a->cancel = rlk_call_cancel();
}

/* The fencing counter's value (GET redisson_lock_token:{name}) into a->token, or a negative
 * error. */
static int token_read(rlk_acq *a)
{
    rlock *l = a->lock;
    rlk_buf key;
    rlk_buf_init(&key);
    redisReply *rep = NULL;
    rlk_args args;
    rlk_args_init(&args);
    int r = rlk_prefix_name(&key, "redisson_lock_token", l->name, l->name_len);
    rlk_args_adds(&args, "GET");
    rlk_args_add(&args, key.p, key.len);
    r = r ? r : rlk_cmd(l->client, RLK_IDEMPOTENT, &args, &rep);
    rlk_buf_free(&key);
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_STRING) {
        a->token = strtoull(rep->str, NULL, 10);
    } else if (r == RLOCK_OK) {
        r = rlk_err(RLOCK_EPROTO, "GET of the fencing counter of '%s': reply type %d", l->name,
                    rep->type);
    }
    freeReplyObject(rep);
    return r;
}

/* An exclusive grant that Redis made as a re-entry (token 0) of a hold this record does not
 * count: the thread holds the lock through another handle, or a failover brought back a hold the
 * thread had released. Its token is the counter's value, since nothing takes an exclusive lock
 * from free while it is held; so that a successful lock never reports token 0, it is read here.
 * Read grants carry the counter's value already (0 when no writer ever held). */
static int grant_token(rlk_acq *a, const rlk_hold *h)
{
    if (h->count > 0 || a->token != 0 || a->lock->kind == RLOCK_READ) {
        return RLOCK_OK;
    }
    int r = token_read(a);
    if (r != RLOCK_OK) {
        /* Held on Redis with no token to report: give the re-entry back. */
        char saved[256];
        snprintf(saved, sizeof(saved), "%s", rlock_last_error());
        (void)a->lock->single->release(a);
        rlk_err_restore(saved);
    }
    return r;
}

/* Records a grant in the calling thread's hold record and starts renewal if asked. */
static int hold_grant(rlk_acq *a, int watchdog)
{
    rlock *l = a->lock;
    rlk_hold *h = rlk_hold_get(l, a->tid, 1);
    if (h == NULL) {
        /* We hold it on Redis but cannot track it: give it back rather than leak a hold. */
        a->lease_ms = l->client->opts.watchdog_timeout_ms;
        l->single->release(a);
        return rlk_err(RLOCK_ENOMEM, "cannot record a hold");
    }
    if (atomic_load(&h->lost)) {
        /* A new grant after a lost one starts over: the old hold is gone on Redis. */
        rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
        hold_stop_renewal(l, h);
        h->count = 0;
        atomic_store(&h->lost, 0);
    }
    int r = grant_token(a, h);
    if (r != RLOCK_OK) {
        rlk_hold_drop_if_empty(l, h);
        return r;
    }
    if (h->count == 0 || a->token != 0) {
        h->token = a->token;
    }
    /* A re-entry never shortens the hold: the lease a partial release keeps is the longest one
     * granted, and a hold under the watchdog stays under it until its last release. */
    if (h->count == 0 || a->lease_ms > h->lease_ms) {
        h->lease_ms = a->lease_ms;
    }
    h->count++;
    if (a->granted_ttl > 0) {
        return grant_extend(a, h, watchdog);
    }
    if (watchdog && h->count > 1 && h->wd.once) {
        /* A re-entry under the watchdog of a hold whose one-shot renewal may still be due. */
        rlk_wd_cancel(l->client->watchdog, &h->wd);
        h->wd.once = 0;
    }
    if (watchdog && (h->count == 1 || !rlk_wd_active(l->client->watchdog, &h->wd))) {
        return rlk_wd_add(l->client->watchdog, &h->wd, l->client->opts.watchdog_timeout_ms);
    }
    return RLOCK_OK;
}

/* A thread that locks again after an unlock with an unknown outcome has moved on from that hold:
 * the pending release is settled (and sent if it never ran) before the new attempt, so that the
 * new grant is counted on what Redis holds and not on a hold that may be gone (a "ghost": a
 * re-entry of nothing, or a hold kept alive by the watchdog after the thread let it go). */
static int settle_before_lock(rlock *l, uint64_t tid)
{
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h == NULL || h->unsure == 0) {
        return RLOCK_OK;
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.lease_ms = h->lease_ms > 0 ? h->lease_ms : l->client->opts.watchdog_timeout_ms;
    int r = (h->unsure & RLK_UNSURE_GRANT) ? settle_grant(&a, h) : RLOCK_OK;
    if (r != RLOCK_OK) {
        return r;
    }
    if (h->unsure & RLK_UNSURE_RELEASE) {
        r = rlk_single_unlock(l);
        return r == RLOCK_ELOST ? RLOCK_OK : r;
    }
    rlk_hold_drop_if_empty(l, h);
    return RLOCK_OK;
}

/* Marks that the thread's last attempt may have been granted unseen (its reply was lost, or the
 * give-back of an unsynced grant may have failed), or that a release may still grant it to the
 * wait whose give-up failed, for settle_grant() to settle next time. */
static void mark_grant_unsure(rlk_acq *a)
{
    rlk_hold *h = rlk_hold_get(a->lock, a->tid, 1);
    if (h != NULL) {
        h->unsure |= RLK_UNSURE_GRANT | (a->leave_failed ? RLK_UNSURE_LEAVE : 0);
    }
}

static int single_acquire_by(rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t deadline);

/* A call with a wait limit returns within wait_ms + command_timeout_ms: every command it sends
 * (settling, attempts, the give-up of a waiter) is bounded by that (rlk_pool_bound). A command
 * the bound cuts short fails as on a timeout (RLOCK_ECONN), and what it would have done is left
 * to expire: a waiter's queue entry ends waiter_timeout_ms after its last heartbeat (rlock.h). */
int rlk_single_acquire(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    int64_t saved =
        rlk_pool_bound(wait_ms < 0 ? 0 : rlk_add_sat(deadline, l->client->opts.command_timeout_ms));
    int r = single_acquire_by(l, wait_ms, lease_ms, deadline);
    rlk_pool_bound_restore(saved);
    return r;
}

static int single_acquire_by(rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t deadline)
{
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.lease_ms = lease_ms > 0 ? lease_ms : l->client->opts.watchdog_timeout_ms;
    a.watchdog = lease_ms < 0;
    a.wait_id = rlk_wait_id_next();
    a.wait_ms = wait_ms;
    a.may_queue = wait_ms != 0;
    /* A fired token ends the call before it sends anything. */
    int r = rlk_cancel_check(a.cancel, "lock", l->name);
    r = r ? r : settle_before_lock(l, a.tid);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_sync_clear();
    a.confirms = rlk_pubsub_confirms(l->client->pubsub);
    r = rlk_keep_synced(&a, l->single->attempt(&a));
    if (r == 0 && wait_ms != 0) {
        r = l->single->wait != NULL ? l->single->wait(&a, deadline) : rlk_wait_loop(&a, deadline);
    }
    if (r == 1) {
        return hold_grant(&a, lease_ms < 0);
    }
    if (r == RLOCK_ECONN || r == RLOCK_EREPLICA || (r != 1 && a.leave_failed)) {
        mark_grant_unsure(&a);
    }
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT, "lock '%s' not acquired within %lld ms", l->name,
                       (long long)wait_ms);
    }
    return r;
}

/* ---- release and queries ----------------------------------------------------------------- */

static int field_count(rlk_acq *a);

/* Leaves the queues of a wait whose give-up did not reach Redis (RLK_UNSURE_LEAVE): it removes
 * the wait's grant registration, so no release can grant the lock to that wait after the count
 * that settle_grant() then reads. Bounded by command_timeout_ms when the call has no bound of
 * its own (an unlock, a lock without a wait limit). */
static int settle_leave(rlk_acq *a, rlk_hold *h)
{
    int r = RLOCK_OK;
    if ((h->unsure & RLK_UNSURE_LEAVE) && a->lock->single->wait_end != NULL) {
        int64_t bound = rlk_pool_bound_get();
        int64_t saved =
            bound != 0
                ? 0
                : rlk_pool_bound(rlk_add_sat(rlk_now_ms(), a->client->opts.command_timeout_ms));
        a->may_queue = 1;
        r = a->lock->single->wait_end(a, 0);
        a->may_queue = 0;
        a->token = 0;
        a->granted_ttl = 0;
        if (bound == 0) {
            rlk_pool_bound_restore(saved);
        }
    }
    if (r < 0) {
        return r;
    }
    h->unsure &= (unsigned char)~RLK_UNSURE_LEAVE;
    return RLOCK_OK;
}

/* Settles an attempt whose outcome was unknown (RLK_UNSURE_GRANT): when Redis counts more holds
 * of the thread's field than the record does, that attempt was granted and its reply lost, or a
 * release that fewer replicas acknowledged was undone by a failover. The thread does not count
 * that hold, so it is given back (without waiting for replicas); a later
 * attempt then takes the lock from free, with a token of its own, instead of re-entering it and
 * keeping a hold nobody will release. Returns RLOCK_OK (the mark cleared) or a negative error. */
static int settle_grant(rlk_acq *a, rlk_hold *h)
{
    int left = settle_leave(a, h);
    if (left != RLOCK_OK) {
        return left;
    }
    int n = field_count(a);
    if (n < 0) {
        return n;
    }
    if (n > h->count) {
        rlk_sync_suppress(1);
        int r = a->lock->single->release(a);
        rlk_sync_suppress(0);
        if (r < 0 && r != RLK_NOT_HELD) {
            return r;
        }
        rlk_log(a->client, RLOCK_LOG_INFO,
                "lock '%s': gave back a hold the thread did not count (a grant whose reply was "
                "lost, or a release that a failover undid)",
                a->lock->name);
    }
    h->unsure &= (unsigned char)~RLK_UNSURE_GRANT;
    return RLOCK_OK;
}

/* Settles a release whose outcome was unknown (RLK_UNSURE_RELEASE) against Redis: the field's count
 * there is h->count if that release never ran and h->count - 1 if it did (less still if the holds
 * are gone: lease ran out, failover). The record keeps the smaller count, so it never counts a hold
 * Redis does not have. Returns how many holds the record dropped (0: the release never ran), or
 * a negative error (the record stays unsure). Limitation: holds of the same lock taken by the
 * same thread through another handle share the field, so with such holds a release that ran
 * looks as if it had not. */
static int hold_settle(rlk_acq *a, rlk_hold *h)
{
    int n = field_count(a);
    if (n < 0) {
        return n;
    }
    int gone = n < h->count ? h->count - n : 0;
    h->count -= gone;
    h->unsure &= (unsigned char)~RLK_UNSURE_RELEASE;
    return gone;
}

/* An unlock of a record whose last release has an unknown outcome. If that release ran, this
 * call was its retry and nothing is sent again: RLOCK_OK, or RLOCK_ELOST when holds beyond the
 * released one are gone too. If it never ran, returns 1: the caller sends it now. */
static int unlock_unsure(rlk_acq *a, rlk_hold *h)
{
    int before = h->count;
    int gone = hold_settle(a, h);
    if (gone <= 0) {
        return gone == 0 ? 1 : gone;
    }
    if (h->count > 0) {
        return RLOCK_OK;
    }
    rlk_hold_obs_end(a->lock, h, before > 1 ? RLK_HOLD_LOST : RLK_HOLD_RELEASED);
    hold_forget(a->lock, h);
    if (before > 1) {
        return rlk_err(RLOCK_ELOST,
                       "the holds on lock '%s' were gone on Redis when an unlock "
                       "whose outcome was unknown was retried",
                       a->lock->name);
    }
    return RLOCK_OK;
}

/* 1 when the release just sent ran on the master but fewer replicas acknowledged it than it
 * has: a failover to one of them would bring the released hold back. The unlock still succeeds
 * (the master released), and the record is marked as after a grant whose reply was lost
 * (RLK_UNSURE_GRANT: Redis may count one hold more than the record), so that the thread's next
 * lock or unlock gives such a hold back before it counts on what Redis holds, instead of
 * re-entering it (a hold count the thread does not know, and no token of its own). */
static int unlock_unsynced(rlk_acq *a, rlk_hold *h)
{
    int acked = 0, n = 0;
    if (!rlk_sync_short(&acked, &n)) {
        return 0;
    }
    rlk_obs_replica_sync_failed(a->client, rlk_obs_kind_of((rlock_kind)a->lock->kind),
                                a->lock->name, a->owner, RLOCK_EREPLICA);
    rlk_log(a->client, RLOCK_LOG_WARN,
            "unlock of '%s': %d of %d replicas acknowledged; the next lock or unlock of this "
            "thread checks that the release stayed",
            a->lock->name, acked, n);
    h->unsure |= RLK_UNSURE_GRANT;
    return 1;
}

/* Sends the release of one hold of h and records its outcome. */
static int unlock_send(rlk_acq *a, rlk_hold *h)
{
    rlock *l = a->lock;
    rlk_sync_clear();
    int r = l->single->release(a);
    int unsynced = (r == 0 || r == 1) && unlock_unsynced(a, h);
    if (r == 0 && --h->count > 0) {
        return RLOCK_OK;
    }
    /* Here the thread's last hold through this handle is gone (or Redis still counts holds
     * taken through another handle, which that handle's record tracks). An unsynced release
     * keeps the record, with no hold and no renewal, until the thread's next lock settles it. */
    if (r == 0 || r == 1) {
        h->count = 0;
        rlk_hold_obs_end(l, h, RLK_HOLD_RELEASED);
        if (!unsynced) {
            hold_forget(l, h);
        }
        return RLOCK_OK;
    }
    if (r == RLK_NOT_HELD) {
        rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
        hold_forget(l, h);
        return rlk_err(RLOCK_ELOST, "the hold on lock '%s' had expired on Redis before unlock",
                       l->name);
    }
    /* Unknown outcome: the record stays, marked, so that a retry of the unlock, or the thread's
     * next lock, settles it against Redis instead of counting a hold that may be gone. Renewal
     * stopped above for a last hold; with more holds, at least count - 1 remain either way and
     * stay renewed. */
    h->unsure = RLK_UNSURE_RELEASE;
    return r;
}

int rlk_single_unlock(rlock *l)
{
    uint64_t tid = rlk_thread_id();
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h == NULL || h->count == 0) {
        return rlk_err(RLOCK_ENOTOWNER,
                       "lock '%s' is not held by this thread (id %llu) through "
                       "this handle",
                       l->name, (unsigned long long)tid);
    }
    if (h->count == 1) {
        /* The last local hold: stop renewing before the release reaches Redis. A renewal that
         * ran after the release would find the owner gone and report a spurious loss; the
         * cancel waits for an in-flight batch, so none can (and the lost check below sees what
         * that batch judged). A settled unsure record below only ever loses holds without a
         * release being sent, so no other cancel is needed. */
        hold_stop_renewal(l, h);
    }
    if (atomic_load(&h->lost)) {
        rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
        hold_forget(l, h);
        return rlk_err(RLOCK_ELOST,
                       "the hold on lock '%s' was lost before unlock (its lease "
                       "ran out)",
                       l->name);
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.hold = h;
    a.lease_ms = h->lease_ms;
    int r = (h->unsure & RLK_UNSURE_GRANT) ? settle_grant(&a, h) : RLOCK_OK;
    if (r != RLOCK_OK) {
        return r;
    }
    r = (h->unsure & RLK_UNSURE_RELEASE) ? unlock_unsure(&a, h) : 1;
    return r == 1 ? unlock_send(&a, h) : r;
}

int rlk_reply_int(const redisReply *r, long long *v, const char *what)
{
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_EPROTO, "%s: expected an integer reply, got type %d", what,
                   r ? r->type : -1);
}

/* Runs a read-only command on the lock key with one field (or none) and returns its reply. */
static int hold_query(rlock *l, const char *cmd, const char *field, size_t flen, redisReply **out)
{
    rlk_args a;
    rlk_args_init(&a);
    rlk_args_adds(&a, cmd);
    rlk_args_add(&a, l->name, l->name_len);
    if (field != NULL) {
        rlk_args_add(&a, field, flen);
    }
    int r = rlk_cmd(l->client, RLK_IDEMPOTENT, &a, out);
    if (r == RLOCK_OK && (*out)->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "%s on '%s': %s", cmd, l->name, (*out)->str);
        freeReplyObject(*out);
        *out = NULL;
    }
    return r;
}

/* The hold count of a's field on Redis (HGET: 0 when the field or the key is gone), or a negative
 * error. */
static int field_count(rlk_acq *a)
{
    rlock *l = a->lock;
    redisReply *rep = NULL;
    int r = hold_query(l, "HGET", a->field, a->field_len, &rep);
    if (r != RLOCK_OK || rep == NULL) {
        return r != RLOCK_OK ? r : rlk_err(RLOCK_EPROTO, "HGET of a hold count: no reply");
    }
    int count = 0;
    if (rep->type == REDIS_REPLY_STRING) {
        count = (int)strtol(rep->str, NULL, 10);
    } else if (rep->type != REDIS_REPLY_NIL) {
        r = rlk_err(RLOCK_EPROTO, "HGET of a hold count: unexpected reply type %d", rep->type);
    }
    freeReplyObject(rep);
    return r ? r : count;
}

int rlk_hash_is_locked(rlock *l)
{
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "EXISTS", NULL, 0, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "EXISTS");
    freeReplyObject(rep);
    return r ? r : (v != 0);
}

int rlk_single_is_held(rlock *l)
{
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    if (h != NULL && atomic_load(&h->lost)) {
        return 0;
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "HEXISTS", a.field, a.field_len, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "HEXISTS");
    freeReplyObject(rep);
    if (r == RLOCK_OK && v == 0 && h != NULL && h->count > 0 && !h->unsure) {
        /* Redis says the hold is gone (its lease ran out unnoticed, or the key was deleted):
         * the record says so too, so that rlock_token() answers 0 from now on (rlock.h). The
         * next unlock then reports RLOCK_ELOST without a round trip, as after a watchdog loss. */
        atomic_store(&h->lost, 1);
    }
    return r ? r : (v != 0);
}

int rlk_single_hold_count(rlock *l)
{
    rlk_acq a;
    rlk_acq_init(&a, l);
    return field_count(&a);
}

int64_t rlk_single_ttl(rlock *l)
{
    redisReply *rep = NULL;
    long long v = 0;
    int r = hold_query(l, "PTTL", NULL, 0, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "PTTL");
    freeReplyObject(rep);
    return r ? RLOCK_TTL_ERROR(r) : (int64_t)v;
}

uint64_t rlk_single_token(rlock *l)
{
    rlk_hold *h = rlk_hold_get(l, rlk_thread_id(), 0);
    /* An unsure last hold may have been released: its token is no longer claimed. */
    int maybe_released = h != NULL && (h->unsure & RLK_UNSURE_RELEASE);
    return h != NULL && h->count - maybe_released > 0 && !atomic_load(&h->lost) ? h->token : 0;
}

void rlk_single_destroy(rlock *l)
{
    rlk_hold_forget_all(l);
    if (l->single != NULL && l->single->impl_free != NULL) {
        l->single->impl_free(l->impl);
    }
    l->impl = NULL;
}

/* ---- extend ------------------------------------------------------------------------------ */

int rlk_hash_extend_read(rlk_acq *a, int64_t lease_ms, const rlk_buf *timeout_prefix)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, a->lock->name, a->lock->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_add(&args, timeout_prefix != NULL ? timeout_prefix->p : "",
                 timeout_prefix != NULL ? timeout_prefix->len : 0);
    redisReply *rep = NULL;
    long long v = 0;
    /* Not idempotent: with replica_sync the write waits for the replicas, as every write. */
    int r = rlk_script(a->client, RLK_SCRIPT_LOCK_EXTEND, 0, &keys, &args, &rep);
    r = r ? r : rlk_reply_int(rep, &v, "lock_extend");
    freeReplyObject(rep);
    return r ? r : (v == 1 ? 1 : RLK_NOT_HELD);
}

int rlk_hash_extend(rlk_acq *a, int64_t lease_ms)
{
    return rlk_hash_extend_read(a, lease_ms, NULL);
}

/* The extend of a hold that Redis no longer has: the record goes, renewal stops, and the loss
 * counts as reported (no per-hold callback follows). */
static int rlk_extend_lost(rlock *l, rlk_hold *h)
{
    rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
    hold_forget(l, h);
    return rlk_err(RLOCK_ELOST, "the hold on lock '%s' was gone when it was extended", l->name);
}

int rlk_single_extend(rlock *l, int64_t lease_ms)
{
    uint64_t tid = rlk_thread_id();
    rlk_hold *h = rlk_hold_get(l, tid, 0);
    if (h == NULL || h->count == 0) {
        return rlk_err(RLOCK_ENOTOWNER,
                       "lock '%s' is not held by this owner (id %llu) through "
                       "this handle",
                       l->name, (unsigned long long)tid);
    }
    if (atomic_load(&h->lost)) {
        hold_stop_renewal(l, h);
        return rlk_extend_lost(l, h);
    }
    rlk_acq a;
    rlk_acq_init(&a, l);
    a.hold = h;
    rlk_sync_clear();
    int r = l->single->extend(&a, lease_ms);
    if (r == RLK_NOT_HELD) {
        hold_stop_renewal(l, h);
        return rlk_extend_lost(l, h);
    }
    if (r < 0) {
        return r;
    }
    int acked = 0, n = 0;
    if (rlk_sync_short(&acked, &n)) {
        rlk_obs_replica_sync_failed(l->client, rlk_obs_kind_of((rlock_kind)l->kind), l->name,
                                    a.owner, RLOCK_EREPLICA);
        return rlk_sync_error(acked, n, "extend of lock", l->name);
    }
    /* A partial release keeps the longest lease granted (rlock_unlock): the extension counts. */
    if (!rlk_wd_active(l->client->watchdog, &h->wd) && lease_ms > h->lease_ms) {
        h->lease_ms = lease_ms;
    }
    return RLOCK_OK;
}
