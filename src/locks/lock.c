/*
 * Lock handles: allocation with the name inline, the fork child's refresh of inherited hold
 * records, rlock_free(), and the identity (owner, hash field) an acquire or release of a handle
 * works with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "lock.h"
#include "lock_lost.h"

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

/* Writes the lock-hash field of owner for l into out (RLK_OWNER_MAX bytes); returns its length. */
size_t rlk_hash_field_of(const rlock *l, const char *owner, size_t owner_len, char *out)
{
    if (l->single != NULL && l->single->hash_field != NULL) {
        return l->single->hash_field(owner, owner_len, out);
    }
    memcpy(out, owner, owner_len);
    out[owner_len] = '\0';
    return owner_len;
}

void rlk_acq_init(rlk_acq *a, rlock *l)
{
    memset(a, 0, sizeof(*a));
    a->lock = l;
    a->client = l->client;
    a->tid = rlk_thread_id();
    a->owner_len = rlk_owner(l->client, a->tid, a->owner);
    a->field_len = rlk_hash_field_of(l, a->owner, a->owner_len, a->field);
    a->ttl_ms = -1;
    a->cancel = rlk_call_cancel();
}
