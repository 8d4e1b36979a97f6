/*
 * Owners (rlock_owner) and the calls that take one: rlock_lock_ex, rlock_unlock_ex,
 * rlock_extend, rlock_is_held_by. An owner is a number from a range threads never use
 * (RLK_OWNER_TID_BASE); a call made for it runs the ordinary lock code with that number as its
 * thread id (rlk_call_enter), so hold records, the watchdog, fork handling and the settling of
 * unsure outcomes treat an owner's holds exactly as a thread's.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "hold_index.h"
#include "lock.h"
#include "lock_group.h"
#include "lock_hold.h"
#include "lock_lost.h"
#include "lock_multi.h"
#include "lock_redlock.h"
#include "owner.h"

struct rlock_owner {
    rlock_client *client;
    uint64_t tid;
    char id[RLK_OWNER_MAX];
};

/* Never reused in the process, so never within a client either. */
static atomic_uint_fast64_t owner_next = RLK_OWNER_TID_BASE + 1;

RLOCK_EXPORT int rlock_owner_new(rlock_client *client, rlock_owner **out)
{
    if (out == NULL || client == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_owner_new: client and out must not be NULL");
    }
    *out = NULL;
    int r = rlk_client_enter(client);
    if (r != RLOCK_OK) {
        return r;
    }
    rlock_owner *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_owner_new: out of memory");
    }
    o->client = client;
    o->tid = (uint64_t)atomic_fetch_add(&owner_next, 1);
    rlk_client_ref(client);
    *out = o;
    return RLOCK_OK;
}

RLOCK_EXPORT void rlock_owner_free(rlock_owner *owner)
{
    if (owner != NULL) {
        rlk_client_unref(owner->client);
        free(owner);
    }
}

RLOCK_EXPORT const char *rlock_owner_id(const rlock_owner *owner)
{
    if (owner == NULL) {
        return "";
    }
    /* Formatted on each call: a fork child's client has a new uuid (rlock_client_id). */
    rlock_owner *o = (rlock_owner *)owner;
    (void)rlk_owner(o->client, o->tid, o->id);
    return o->id;
}

int rlk_owner_tid(const rlock_owner *owner, const rlock_client *c, const char *what, uint64_t *tid)
{
    if (owner == NULL) {
        return rlk_err(RLOCK_EINVAL, "%s: an owner is required (rlock_owner_new)", what);
    }
    if (owner->client != c) {
        return rlk_err(RLOCK_EINVAL, "%s: the owner belongs to another client", what);
    }
    *tid = owner->tid;
    return RLOCK_OK;
}

RLOCK_EXPORT void rlock_lock_args_init(rlock_lock_args *args)
{
    if (args != NULL) {
        memset(args, 0, sizeof(*args));
        args->wait_ms = RLOCK_WAIT_FOREVER;
        args->lease_ms = -1;
    }
}

/* The owner's number for a call on lock (0: the calling thread), or RLOCK_EINVAL for an owner
 * of another client (a group's members check their own clients). */
static int owner_tid(const rlock *lock, const rlock_owner *owner, uint64_t *tid)
{
    *tid = 0;
    if (owner == NULL) {
        return RLOCK_OK;
    }
    if (!lock->ops->group && owner->client != lock->client) {
        return rlk_err(RLOCK_EINVAL, "the owner belongs to another client than lock '%s'",
                       lock->name);
    }
    *tid = owner->tid;
    return RLOCK_OK;
}

static int lock_ex_check(rlock *lock, const rlock_lock_args *args, uint64_t *tid)
{
    if (lock == NULL || args == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_lock_ex: lock and args must not be NULL");
    }
    for (size_t i = 0; i < sizeof(args->reserved) / sizeof(args->reserved[0]); i++) {
        if (args->reserved[i] != NULL) {
            return rlk_err(RLOCK_EINVAL, "rlock_lock_ex: reserved fields must be NULL "
                                         "(use rlock_lock_args_init)");
        }
    }
    if (args->wait_ms < 0 && args->wait_ms != RLOCK_WAIT_FOREVER) {
        return rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)args->wait_ms);
    }
    return owner_tid(lock, args->owner, tid);
}

/* Registers the hold's loss callback after its grant: on the handle, and for a multi-lock a
 * forwarding entry on each member, whose own hold records are the ones the watchdog renews. */
static void lock_ex_on_lost(rlock *lock, const rlock_lock_args *args)
{
    uint64_t tid = rlk_thread_id();
    if (rlk_hold_cb_set(lock, tid, args->on_lost, args->user_data, NULL) != RLOCK_OK) {
        return;
    }
    size_t n = 0;
    rlock *const *members = rlk_group_members(lock, &n);
    for (size_t i = 0; i < n; i++) {
        (void)rlk_hold_cb_set(members[i], tid, NULL, NULL, lock);
    }
}

RLOCK_EXPORT int rlock_lock_ex(rlock *lock, const rlock_lock_args *args)
{
    uint64_t tid = 0;
    int r = lock_ex_check(lock, args, &tid);
    r = r ? r : rlk_cancel_check(args->cancel, "lock", lock->name);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_call_ctx saved;
    rlk_call_enter(tid, args->cancel, &saved);
    r = rlock_try_lock(lock, args->wait_ms, args->lease_ms); /* WAIT_FOREVER: no limit */
    if (r == RLOCK_OK && args->on_lost != NULL) {
        lock_ex_on_lost(lock, args);
    }
    rlk_call_leave(&saved);
    return r;
}

/* Runs expr as owner on the handle `target` (lock, or the handle of the same lock that holds the
 * owner's record): the shared frame of the owner calls below. */
#define OWNER_CALL(lock, owner, expr)                                                              \
    do {                                                                                           \
        if ((lock) == NULL) {                                                                      \
            return rlk_err(RLOCK_EINVAL, "lock must not be NULL");                                 \
        }                                                                                          \
        uint64_t tid_ = 0;                                                                         \
        int r_ = owner_tid((lock), (owner), &tid_);                                                \
        if (r_ != RLOCK_OK) {                                                                      \
            return r_;                                                                             \
        }                                                                                          \
        rlock *target = owner_handle((lock), tid_);                                                \
        rlk_call_ctx saved_;                                                                       \
        rlk_call_enter(tid_, NULL, &saved_);                                                       \
        r_ = (expr);                                                                               \
        rlk_call_leave(&saved_);                                                                   \
        return r_;                                                                                 \
    } while (0)

/* The handle to act on for owner tid: lock when it holds the owner's record (or for the calling
 * thread), else another open handle of the same lock that does. */
static rlock *owner_handle(rlock *lock, uint64_t tid)
{
    if (tid == 0 || lock->ops->group) {
        return lock;
    }
    rlk_hold *h = rlk_hold_get(lock, tid, 0);
    return h != NULL && h->count > 0 ? lock : rlk_hold_index_find(lock, tid);
}

RLOCK_EXPORT int rlock_unlock_ex(rlock *lock, rlock_owner *owner)
{
    OWNER_CALL(lock, owner, rlock_unlock(target));
}

RLOCK_EXPORT int rlock_is_held_by(rlock *lock, rlock_owner *owner)
{
    OWNER_CALL(lock, owner, rlock_is_held(target));
}

static int extend_call(rlock *lock, int64_t lease_ms)
{
    if (lease_ms <= 0 || lease_ms > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "lease_ms must be in [1, %lld], got %lld",
                       (long long)RLOCK_MAX_DURATION_MS, (long long)lease_ms);
    }
    int r = lock->ops->group ? RLOCK_OK : rlk_client_enter(lock->client);
    r = r || lock->ops->group ? r : rlk_client_blocking(lock->client, "rlock_extend");
    return r ? r : lock->ops->extend(lock, lease_ms);
}

RLOCK_EXPORT int rlock_extend(rlock *lock, rlock_owner *owner, int64_t lease_ms)
{
    OWNER_CALL(lock, owner, extend_call(target, lease_ms));
}

/* The token of owner tid's hold through a single-name handle: from a loop client's records, or
 * from the handle (or the other handle of the same lock) that holds the owner's record. */
static uint64_t token_single(rlock *lock, uint64_t tid)
{
    if (rlk_client_enter(lock->client) != RLOCK_OK) {
        return 0;
    }
    if (lock->client->loop_token != NULL) {
        return lock->client->loop_token(lock, tid);
    }
    rlock *target = owner_handle(lock, tid);
    rlk_call_ctx saved;
    rlk_call_enter(tid, NULL, &saved);
    uint64_t t = target->ops->token(target);
    rlk_call_leave(&saved);
    return t;
}

/* A group's: a loop RedLock's is the largest of its members' (each member's hold is its own
 * client's record); a loop multi-lock has none, as a threaded one; a threaded group answers
 * through its own record. */
static uint64_t token_group(rlock *lock, uint64_t tid)
{
    size_t n = 0;
    rlock *const *m = rlk_redlock_members(lock, &n);
    rlock *const *mm = m != NULL ? m : rlk_group_members(lock, &n);
    if (mm == NULL || n == 0 || rlk_client_enter(mm[0]->client) != RLOCK_OK ||
        mm[0]->client->loop_token == NULL) {
        rlk_call_ctx saved;
        rlk_call_enter(tid, NULL, &saved);
        uint64_t t = lock->ops->token(lock);
        rlk_call_leave(&saved);
        return t;
    }
    uint64_t best = 0;
    for (size_t i = 0; m != NULL && i < n; i++) {
        uint64_t t = token_single(m[i], tid);
        best = t > best ? t : best;
    }
    return best;
}

RLOCK_EXPORT uint64_t rlock_token_ex(rlock *lock, rlock_owner *owner)
{
    uint64_t tid = 0;
    if (lock == NULL) {
        (void)rlk_err(RLOCK_EINVAL, "lock must not be NULL");
        return 0;
    }
    if (owner_tid(lock, owner, &tid) != RLOCK_OK) {
        return 0;
    }
    return lock->ops->group ? token_group(lock, tid) : token_single(lock, tid);
}
