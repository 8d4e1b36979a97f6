/*
 * Per-hold loss callbacks (rlock_lock_args.on_lost): a short list on each handle, keyed by the
 * owner number, guarded by the handle mutex and read by the watchdog thread when it finds a hold
 * lost. A multi-lock's callback sits on the group handle; each member carries a forwarding entry
 * that names the group, so the first member's loss fires the group's callback, once.
 */
#include <stdlib.h>

#include "error.h"
#include "lock.h"
#include "lock_lost.h"

int rlk_hold_cb_set(rlock *l, uint64_t tid, void (*fn)(rlock *, void *), void *ud, rlock *group)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb *cb = l->cbs;
    while (cb != NULL && (cb->tid != tid || cb->group != group)) {
        cb = cb->next;
    }
    if (cb == NULL) {
        cb = calloc(1, sizeof(*cb));
        if (cb == NULL) {
            pthread_mutex_unlock(&l->mu);
            return rlk_err(RLOCK_ENOMEM, "out of memory registering on_lost for '%s'", l->name);
        }
        cb->tid = tid;
        cb->group = group;
        cb->next = l->cbs;
        l->cbs = cb;
    }
    cb->fn = fn; /* a re-entry's callback replaces the hold's */
    cb->user_data = ud;
    pthread_mutex_unlock(&l->mu);
    return RLOCK_OK;
}

/* Unlinks the entries for which match() holds into a list of their own. Mutex held. */
static rlk_hold_cb *cb_take(rlock *l, uint64_t tid, const rlock *group, int by_group)
{
    rlk_hold_cb *taken = NULL;
    rlk_hold_cb **pp = &l->cbs;
    while (*pp != NULL) {
        rlk_hold_cb *cb = *pp;
        if (by_group ? cb->group == group : cb->tid == tid) {
            *pp = cb->next;
            cb->next = taken;
            taken = cb;
        } else {
            pp = &cb->next;
        }
    }
    return taken;
}

static void cb_free_list(rlk_hold_cb *cb)
{
    while (cb != NULL) {
        rlk_hold_cb *next = cb->next;
        free(cb);
        cb = next;
    }
}

void rlk_hold_cb_drop_locked(rlock *l, uint64_t tid)
{
    if (l->cbs != NULL) {
        cb_free_list(cb_take(l, tid, NULL, 0));
    }
}

void rlk_hold_cb_drop_group(rlock *l, rlock *group)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb *taken = cb_take(l, 0, group, 1);
    pthread_mutex_unlock(&l->mu);
    cb_free_list(taken);
}

void rlk_hold_cb_group_gone(rlock *member, rlock *group)
{
    rlk_hold_cb_drop_group(member, group);
    rlock_client *c = member->client;
    if (c != NULL && c->loop_group_gone != NULL && rlk_client_check(c) == RLOCK_OK) {
        c->loop_group_gone(member, group);
    }
}

/* Takes the entries of tid out of l. */
static rlk_hold_cb *cb_take_tid(rlock *l, uint64_t tid)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb *taken = cb_take(l, tid, NULL, 0);
    pthread_mutex_unlock(&l->mu);
    return taken;
}

void rlk_hold_cb_fire(rlock *l, uint64_t tid)
{
    rlk_hold_cb *taken = cb_take_tid(l, tid);
    for (rlk_hold_cb *cb = taken; cb != NULL; cb = cb->next) {
        if (cb->fn != NULL) {
            cb->fn(l, cb->user_data);
        }
        if (cb->group == NULL) {
            continue;
        }
        /* A member's loss: the group's own entry goes with its first call (once). */
        rlk_hold_cb *own = cb_take_tid(cb->group, tid);
        for (rlk_hold_cb *g = own; g != NULL; g = g->next) {
            if (g->fn != NULL && g->group == NULL) {
                g->fn(cb->group, g->user_data);
            }
        }
        cb_free_list(own);
    }
    cb_free_list(taken);
}

int rlk_hold_cb_take_own(rlock *l, uint64_t tid, void (**fn)(rlock *, void *), void **ud)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb **pp = &l->cbs;
    while (*pp != NULL && ((*pp)->tid != tid || (*pp)->group != NULL)) {
        pp = &(*pp)->next;
    }
    rlk_hold_cb *cb = *pp;
    if (cb != NULL) {
        *pp = cb->next;
    }
    pthread_mutex_unlock(&l->mu);
    if (cb == NULL) {
        return 0;
    }
    *fn = cb->fn;
    *ud = cb->user_data;
    free(cb);
    return 1;
}

void rlk_hold_cb_drop(rlock *l, uint64_t tid)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb_drop_locked(l, tid);
    pthread_mutex_unlock(&l->mu);
}

void rlk_hold_cb_free_all(rlock *l)
{
    pthread_mutex_lock(&l->mu);
    rlk_hold_cb *taken = l->cbs;
    l->cbs = NULL;
    pthread_mutex_unlock(&l->mu);
    cb_free_list(taken);
}
