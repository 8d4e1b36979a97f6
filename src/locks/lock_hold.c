/*
 * Hold records: one per (handle, thread or owner). Only its thread changes count, token and
 * lease; the watchdog only sets `lost`. Records are linked in the handle under its mutex, which
 * is never held across Redis I/O or a watchdog cancel.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hold_index.h"
#include "lock.h"
#include "lock_hold.h"
#include "lock_lost.h"
#include "lock_observe.h"

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
void rlk_hold_stop_renewal(rlock *l, rlk_hold *h)
{
    if (l->single != NULL) {
        rlk_wd_cancel(l->client->watchdog, &h->wd);
    }
}

void rlk_hold_forget(rlock *l, rlk_hold *h)
{
    /* A hold dropped on a path that reported no release or loss still leaves the holds gauge. */
    rlk_hold_obs_end(l, h, RLK_HOLD_FORGOTTEN);
    rlk_hold_stop_renewal(l, h);
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
        rlk_hold_forget(l, h);
    }
}

void rlk_hold_lost_unsure(rlock *l, rlk_hold *h)
{
    rlk_hold_obs_end(l, h, RLK_HOLD_LOST);
    h->count = 0;
    h->unsure |= RLK_UNSURE_GRANT;
    atomic_store(&h->lost, 0);
}

void rlk_hold_forget_all(rlock *l)
{
    rlk_handle_refresh(l);
    while (l->holds != NULL) {
        rlk_hold_forget(l, l->holds);
    }
}

int rlk_hold_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    rlk_hold *h = RLK_CONTAINER_OF(e, rlk_hold, wd);
    rlock *l = h->lock;
    char owner[RLK_OWNER_MAX];
    char f[RLK_OWNER_MAX];
    size_t n = rlk_owner(l->client, h->tid, owner);
    n = rlk_hash_field_of(l, owner, n, f);
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
