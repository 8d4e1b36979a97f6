/*
 * The lock types' reports to the observation core. A hold records when it began (rlk_hold's
 * obs_t0) so that its full release or loss reports how long it was held; whoever ends it first
 * takes that time with an exchange, so a loss the watchdog reported is not reported again by
 * the unlock that returns RLOCK_ELOST. A group reports as itself, with its first member's client
 * and name; the member calls a multi-lock makes inside its own call are not reported.
 */
#include <string.h>

#include "lock_observe.h"

/* 1 while this thread is inside a group's acquire or unlock (rlk_obs_in_group()). */
static _Thread_local int in_group;

int rlk_obs_in_group(void)
{
    return in_group;
}

int rlk_obs_group_set(int on)
{
    int was = in_group;
    in_group = on;
    return was;
}

void rlk_obs_target_of(rlock *l, uint64_t tid, rlk_obs_target *t)
{
    rlock *first = l->ops->group ? l->ops->first_member(l) : l;
    t->client = first->client;
    t->name = first->name;
    t->kind = l->ops->group ? l->ops->obs_kind : rlk_obs_kind_of((rlock_kind)l->kind);
    t->owner = NULL;
    if (!rlk_obs_hooked(t->client)) {
        return;
    }
    size_t n = rlk_owner(t->client, tid, t->owner_buf);
    if (l->single != NULL && l->single->hash_field != NULL) {
        char field[RLK_OWNER_MAX];
        l->single->hash_field(t->owner_buf, n, field);
        memcpy(t->owner_buf, field, sizeof(field));
    }
    t->owner = t->owner_buf;
}

void rlk_hold_obs_end(rlock *l, rlk_hold *h, int how)
{
    int64_t t0 = atomic_exchange_explicit(&h->obs_t0, 0, memory_order_relaxed);
    if (t0 == 0) {
        return; /* never observed, or its end was reported already */
    }
    rlk_obs_target t;
    rlk_obs_target_of(l, h->tid, &t);
    /* Inside a group's unlock, a hook that calls rlock is observed as usual. */
    int saved = rlk_obs_group_set(0);
    if (how == RLK_HOLD_RELEASED) {
        rlk_obs_release(t.client, t.kind, t.name, t.owner, t0, h->token);
    } else if (how == RLK_HOLD_LOST) {
        rlk_obs_lost(t.client, t.kind, t.name, t.owner, t0, h->token);
    } else {
        rlk_obs_forget(t.client, t.kind, t.name);
    }
    rlk_obs_group_set(saved);
}
