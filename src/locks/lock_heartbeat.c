/*
 * The liveness heartbeat of a waiter recorded in Redis (see lock_heartbeat.h): one watchdog
 * entry per waiting thread, allocated when its wait begins and freed when it ends.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lock_heartbeat.h"
#include "error.h"

int rlk_waiter_hb_start(rlk_acq *a, const rlk_renew_class *cls, const char *member, size_t len,
                        rlk_waiter_hb **out)
{
    rlk_waiter_hb *w = calloc(1, sizeof(*w) + a->lock->name_len + 1);

    *out = NULL;
    if (w == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory for the heartbeat of a waiter of '%s'",
                       a->lock->name);
    }
    memcpy(w->name, a->lock->name, a->lock->name_len);
    w->name_len = a->lock->name_len;
    memcpy(w->member, member, len);
    w->member_len = len;
    rlk_wd_entry_init(&w->wd, cls);
    int rc = rlk_wd_add(a->client->watchdog, &w->wd, a->client->opts.waiter_timeout_ms);
    if (rc != RLOCK_OK) {
        free(w);
        return rc;
    }
    *out = w;
    return RLOCK_OK;
}

int rlk_waiter_hb_restart(rlk_acq *a, rlk_waiter_hb *w)
{
    const rlk_renew_class *cls = w->wd.cls;

    /* The heartbeat that found the entry gone may still be finishing: the cancel waits for it. */
    rlk_wd_cancel(a->client->watchdog, &w->wd);
    rlk_wd_entry_init(&w->wd, cls);
    return rlk_wd_add(a->client->watchdog, &w->wd, a->client->opts.waiter_timeout_ms);
}

void rlk_waiter_hb_stop(rlk_acq *a, rlk_waiter_hb **w)
{
    if (*w == NULL) {
        return;
    }
    /* A freed client's watchdog has already dropped every entry (as lock.c assumes too). A
     * heartbeat in flight is waited for only within the lock call's bound (rlk_pool_bound): a
     * paused server must not hold the call beyond it. Past that, the watchdog frees the entry
     * when the heartbeat ends, and the waiter's entry, which that heartbeat may put back,
     * expires waiter_timeout_ms later. */
    if (!atomic_load(&a->client->closed) &&
        !rlk_wd_cancel_by(a->client->watchdog, &(*w)->wd, rlk_pool_bound_get())) {
        *w = NULL;
        return;
    }
    free(*w);
    *w = NULL;
}

void rlk_waiter_hb_release(rlk_wd_entry *e)
{
    free((char *)e - offsetof(rlk_waiter_hb, wd));
}

int rlk_waiter_hb_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    rlk_waiter_hb *w = (rlk_waiter_hb *)(void *)((char *)e - offsetof(rlk_waiter_hb, wd));
    int rc = rlk_buf_append(key, w->name, w->name_len);

    return rc != RLOCK_OK ? rc : rlk_buf_append(field, w->member, w->member_len);
}

/* Nothing to do: the heartbeat script that found the entry gone has woken the waiter where the
 * type can (the fair lock's own channel), and the waiter's next attempt records it again and
 * restarts the heartbeat; after a whole timeout without answers, its entry expired anyway. */
void rlk_waiter_hb_lost(rlk_wd_entry *e)
{
    (void)e;
}
