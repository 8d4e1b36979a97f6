/*
 * The subscriber's channel table and waiter API (pubsub.h): one ref-counted entry per channel
 * that local waiters listen on, with wake-up permits (a message never lost between an attempt
 * and a sleep) and a linger after the last waiter left. Waiter threads change entries under the
 * mutex and wake the subscriber thread (pubsub_conn.c), which alone touches the connections.
 * docs/internals/subscriber.md explains the design.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cancel.h"
#include "error.h"
#include "pubsub_armed.h"
#include "pubsub_impl.h"

static uint32_t channel_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    }
    return h % RLK_PS_BUCKETS;
}

/* The entry of channel ch subscribed plainly (pattern 0) or through its literal pattern (1). A
 * pattern entry is keyed by its channel too, so a refused PSUBSCRIBE can turn it into a plain
 * one in place. */
rlk_sub *rlk_find(rlk_pubsub *ps, const char *ch, size_t len, int pattern)
{
    for (rlk_sub *s = ps->buckets[channel_hash(ch, len)]; s; s = s->next) {
        if (s->len == len && s->pattern == pattern && memcmp(s->channel, ch, len) == 0) {
            return s;
        }
    }
    return NULL;
}

/* Takes s out of the idle list (it gets a waiter again, expires, or is freed). */
void rlk_idle_unlink(rlk_pubsub *ps, rlk_sub *s)
{
    if (!s->lingering) {
        return;
    }
    *(s->idle_prev ? &s->idle_prev->idle_next : &ps->idle_head) = s->idle_next;
    *(s->idle_next ? &s->idle_next->idle_prev : &ps->idle_tail) = s->idle_prev;
    s->idle_prev = s->idle_next = NULL;
    s->lingering = 0;
}

/* Frees an entry already taken out of its hash chain. */
void rlk_sub_destroy(rlk_pubsub *ps, rlk_sub *s)
{
    rlk_idle_unlink(ps, s);
    pthread_cond_destroy(&s->cv);
    free(s->fail_msg);
    free(s->twin);
    free(s->pat);
    free(s->channel);
    free(s);
    ps->entries--;
}

void rlk_unlink_free(rlk_pubsub *ps, rlk_sub *s)
{
    rlk_sub **pp = &ps->buckets[channel_hash(s->channel, s->len)];
    while (*pp != s) {
        pp = &(*pp)->next;
    }
    *pp = s->next;
    rlk_sub_destroy(ps, s);
}

void rlk_mark_dirty(rlk_pubsub *ps, rlk_sub *s)
{
    if (!s->dirty) {
        s->dirty = 1;
        s->next_dirty = ps->dirty;
        ps->dirty = s;
    }
}

void rlk_poke(rlk_pubsub *ps)
{
    char b = 1;
    ssize_t n = write(ps->wake[1], &b, 1);
    (void)n; /* A full pipe already guarantees a wake-up. */
}

/* Sets the permits. Waiters sleeping with an armed attempt sleep on their own condition
 * variables (so that answering a message with an armed attempt wakes only its owner), so they
 * are signalled here, with the mutex held; the others by the caller, on the entry's. */
static void set_permits(rlk_sub *s, int all)
{
    s->wake_alls += (uint64_t)(all != 0);
    int target = all ? s->refs : s->permits + 1;
    s->permits = target > s->refs ? s->refs : target;
    for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
        pthread_cond_signal(&a->cv);
    }
}

/* Gives permits and wakes the entry's waiters at once (a joiner, with the mutex held). */
static void entry_give(rlk_sub *s, int all)
{
    set_permits(s, all);
    pthread_cond_broadcast(&s->cv);
}

/* Gives permits from the thread; the waiters are woken by rlk_wake_given() once the mutex is
 * released, so that a woken waiter does not block on the mutex the thread still holds (on a
 * VM each extra sleep and wake-up costs tens of microseconds of the hand-off). */
void rlk_give_later(rlk_pubsub *ps, rlk_sub *s, int all)
{
    set_permits(s, all);
    if (s->refs > 0 && !s->waking) {
        s->waking = 1;
        s->next_wake = ps->wakes;
        ps->wakes = s;
    }
}

/* Called by the thread without the mutex. Safe: only this thread frees entries, and an entry
 * in the list had a waiter when it was added. */
void rlk_wake_given(rlk_pubsub *ps)
{
    rlk_sub *s = ps->wakes;
    ps->wakes = NULL;
    while (s != NULL) {
        rlk_sub *next = s->next_wake;
        s->waking = 0;
        s->next_wake = NULL;
        pthread_cond_broadcast(&s->cv);
        s = next;
    }
}

/* Adds k permits (at most one per waiter) from the thread; woken as rlk_give_later(). */
void rlk_give_n_later(rlk_pubsub *ps, rlk_sub *s, int k)
{
    if (k <= 0) {
        return;
    }
    s->permits = k >= s->refs - s->permits ? s->refs : s->permits + k;
    for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
        pthread_cond_signal(&a->cv);
    }
    if (s->refs > 0 && !s->waking) {
        s->waking = 1;
        s->next_wake = ps->wakes;
        ps->wakes = s;
    }
}

int rlk_sub_join(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out)
{
    return rlk_sub_join_mode(ps, channel, len, RLK_MSG_LOCK, out);
}

/* The pattern of a channel (pubsub.h). */
char *rlk_literal_pattern(const char *p, size_t len, size_t *out_len)
{
    char *pat = malloc(2 * len + 1);
    size_t n = 0;
    for (size_t i = 0; pat != NULL && i < len; i++) {
        if (strchr("*?[]\\^", p[i]) != NULL && p[i] != '\0') {
            pat[n++] = '\\';
        }
        pat[n++] = p[i];
    }
    if (pat != NULL) {
        pat[n] = '\0';
        *out_len = n;
    }
    return pat;
}

/* A new entry for channel, linked in its bucket, or NULL without memory. Mutex held. */
static rlk_sub *sub_create(rlk_pubsub *ps, const char *channel, size_t len, int pattern)
{
    rlk_sub *s = calloc(1, sizeof(*s));
    char *copy = s ? malloc(len + 1) : NULL;
    char *pat = copy && pattern ? rlk_literal_pattern(channel, len, &s->pat_len) : NULL;
    if (copy == NULL || (pattern && pat == NULL)) {
        free(copy);
        free(s);
        return NULL;
    }
    memcpy(copy, channel, len);
    copy[len] = '\0';
    s->channel = copy;
    s->len = len;
    s->pattern = pattern;
    s->pat = pat;
    ps->entries++;
    rlk_cond_init_monotonic(&s->cv);
    uint32_t h = channel_hash(channel, len);
    s->next = ps->buckets[h];
    ps->buckets[h] = s;
    return s;
}

/* Joins channel's entry (plain, or through its literal pattern), creating it if needed. twin
 * (malloc()ed, taken over; NULL for none) is set before the mutex is released, so that the
 * confirmation of a new wake channel finds its twin. */
static int sub_join_kind(rlk_pubsub *ps, const char *channel, size_t len, int mode, int pattern,
                         char *twin, rlk_sub **out)
{
    *out = NULL;
    pthread_mutex_lock(&ps->mu);
    pattern = pattern && !ps->no_patterns;
    rlk_sub *s = rlk_find(ps, channel, len, pattern);
    if (s == NULL && (s = sub_create(ps, channel, len, pattern)) == NULL) {
        pthread_mutex_unlock(&ps->mu);
        free(twin);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a channel entry");
    }
    if (twin != NULL) {
        free(s->twin);
        s->twin = twin;
        s->twin_len = strlen(twin);
    }
    int was_idle = s->refs++ == 0;
    s->mode = mode;
    if (was_idle) {
        ps->live++;
        rlk_idle_unlink(ps, s);
    }
    if (s->sent && s->pending == 0) {
        /* Already live. With other waiters, a message published between our failed attempt
         * and joining may have reached the entry before we counted, so re-attempt once rather
         * than risk sleeping past it. A lingering entry stayed subscribed all along, so only a
         * message that arrived while nobody waited can have been missed. */
        if (!was_idle || s->missed) {
            entry_give(s, 0);
        }
        s->missed = 0;
    } else if (!s->sent) {
        rlk_mark_dirty(ps, s);
        rlk_poke(ps);
    }
    pthread_mutex_unlock(&ps->mu);
    *out = s;
    return RLOCK_OK;
}

int rlk_sub_join_mode(rlk_pubsub *ps, const char *channel, size_t len, int mode, rlk_sub **out)
{
    return sub_join_kind(ps, channel, len, mode, 0, NULL, out);
}

int rlk_sub_join_pattern(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out)
{
    return sub_join_kind(ps, channel, len, RLK_MSG_LOCK, 1, NULL, out);
}

int rlk_sub_join_named(rlk_pubsub *ps, const char *channel, size_t len, const char *twin,
                       size_t twin_len, rlk_sub **out)
{
    char *copy = malloc(twin_len + 1);
    if (copy == NULL) {
        *out = NULL;
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a channel entry");
    }
    memcpy(copy, twin, twin_len);
    copy[twin_len] = '\0';
    return sub_join_kind(ps, channel, len, RLK_MSG_NAMED, 0, copy, out);
}

/* The failure recorded for s, as the caller's error. Mutex held. */
static int sub_failure(const rlk_sub *s)
{
    return rlk_err(s->fail_code, "%s",
                   s->fail_msg != NULL ? s->fail_msg : "the channel's subscription failed");
}

/* What the cancel thread wakes when a sleeper's token fires (rlk_sub_wait_cancel). */
typedef struct ps_cancel_wake {
    rlk_pubsub *ps;
    rlk_sub *s;
    rlk_armed *armed;
} ps_cancel_wake;

static void ps_cancel_wake_fn(void *arg)
{
    ps_cancel_wake *w = arg;
    pthread_mutex_lock(&w->ps->mu);
    pthread_cond_broadcast(&w->s->cv);
    if (w->armed != NULL) {
        pthread_cond_broadcast(&w->armed->cv);
    }
    pthread_mutex_unlock(&w->ps->mu);
}

int rlk_sub_wait(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed)
{
    return rlk_sub_wait_cancel(ps, s, timeout_ms, armed, NULL);
}

/* The sleep of rlk_sub_wait_cancel(): until a permit, a failure, a claim of the armed attempt,
 * an interrupt, the token or the deadline. Returns RLK_WAIT_TIMEOUT when the deadline passed
 * (mutex released, armed unlinked), else -1 with the mutex held. */
static int ps_sleep(rlk_pubsub *ps, rlk_sub *s, int64_t deadline, rlk_armed *armed,
                    const rlock_cancel *cancel)
{
    /* A claimed attempt (state SENT; the claim unlinked it) wakes without a permit: permits
     * given meanwhile answer later messages and stay for the next wait. */
    while (s->permits == 0 && s->fail_code == 0 &&
           (armed == NULL || (armed->state == RLK_ARMED_IDLE && armed->seen == s->wake_alls)) &&
           !ps->interrupted && !rlk_cancel_is_fired(cancel)) {
        if (armed != NULL && !armed->listed) {
            rlk_armed_link(s, armed); /* offered while asleep only */
        }
        pthread_cond_t *cv = armed != NULL ? &armed->cv : &s->cv;
        if (deadline == INT64_MAX) {
            pthread_cond_wait(cv, &ps->mu);
            continue;
        }
        if (rlk_now_ms() >= deadline) {
            rlk_armed_unlink(s, armed); /* not claimed: a claim sets SENT, ending the loop */
            pthread_mutex_unlock(&ps->mu);
            return RLK_WAIT_TIMEOUT;
        }
        struct timespec ts = {(time_t)(deadline / 1000), (long)((deadline % 1000) * 1000000)};
        pthread_cond_timedwait(cv, &ps->mu, &ts);
    }
    return -1;
}

/* rlk_sub_wait_cancel() once the token is watched. */
static int rlk_sub_wait_locked(rlk_pubsub *ps, rlk_sub *s, int64_t deadline, rlk_armed *armed,
                               const rlock_cancel *cancel)
{
    pthread_mutex_lock(&ps->mu);
    if (armed != NULL) {
        armed->state = RLK_ARMED_IDLE;
        armed->conn = NULL;
        armed->listed = 0;
        if (rlk_grant_take_pending(s, armed)) {
            /* Granted while this waiter was between two attempts (pubsub_dispatch.c). */
            pthread_mutex_unlock(&ps->mu);
            return RLK_WAIT_GRANTED;
        }
    }
    if (ps_sleep(ps, s, deadline, armed, cancel) == RLK_WAIT_TIMEOUT) {
        return RLK_WAIT_TIMEOUT;
    }
    rlk_armed_unlink(s, armed);
    if (armed != NULL && armed->state != RLK_ARMED_IDLE) {
        pthread_mutex_unlock(&ps->mu);
        return rlk_armed_finish(ps, armed);
    }
    int r = RLK_WAIT_WOKEN;
    /* Woken by a wake-up of every waiter: it counts as this waiter's permit. */
    int woken_all = armed != NULL && armed->seen != s->wake_alls;
    if (armed != NULL) {
        armed->seen = s->wake_alls;
    }
    if (s->fail_code != 0) {
        r = sub_failure(s);
    } else if (rlk_cancel_is_fired(cancel) && !woken_all) {
        r = RLK_WAIT_CANCELED; /* a permit stays for a waiter that is not cancelled */
    } else if (s->permits > 0) {
        s->permits--;
    } else if (!woken_all) {
        r = RLK_WAIT_INTERRUPTED; /* the permits stay for the waiters that are not */
    }
    pthread_mutex_unlock(&ps->mu);
    return r;
}

int rlk_sub_wait_cancel(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed,
                        const rlock_cancel *cancel)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), timeout_ms);
    ps_cancel_wake cw = {ps, s, armed};
    rlk_cancel_watch watch;
    if (rlk_cancel_watch_begin(&watch, cancel, ps_cancel_wake_fn, &cw) != RLOCK_OK &&
        deadline == INT64_MAX) {
        deadline = rlk_add_sat(rlk_now_ms(), 10); /* no cancel thread: look again soon */
    }
    int r = rlk_sub_wait_locked(ps, s, deadline, armed, cancel);
    rlk_cancel_watch_end(&watch);
    return r;
}

void rlk_pubsub_interrupt(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    ps->interrupted = 1;
    /* Every sleeper is woken: plain waiters on their entry's condition variable, armed waiters
     * on their own. They see the flag under the mutex, so none can miss it. */
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        for (rlk_sub *s = ps->buckets[i]; s != NULL; s = s->next) {
            pthread_cond_broadcast(&s->cv);
            for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
                pthread_cond_broadcast(&a->cv);
            }
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

int rlk_pubsub_interrupted(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    int r = ps->interrupted;
    pthread_mutex_unlock(&ps->mu);
    return r;
}

void rlk_sub_leave(rlk_pubsub *ps, rlk_sub *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->mu);
    if (--s->refs == 0) {
        ps->live--;
        s->permits = 0;
        s->missed = 0;
        /* Every waiter that saw the failure has left: a new one subscribes afresh. */
        s->fail_code = 0;
        s->refused = 0;
        free(s->fail_msg);
        s->fail_msg = NULL;
        if (s->sent) {
            s->lingering = 1;
            s->idle_since = rlk_now_ms();
            s->idle_prev = ps->idle_tail;
            *(ps->idle_tail ? &ps->idle_tail->idle_next : &ps->idle_head) = s;
            ps->idle_tail = s;
            /* No poke: while any entry exists the thread wakes at least every linger period
             * (expire_idle in pubsub_conn.c), and a poke here would wake it in the middle of a
             * hand-off. */
        } else {
            /* Never subscribed (or already unsubscribing): nothing worth keeping. */
            rlk_mark_dirty(ps, s);
            rlk_poke(ps);
        }
    } else if (s->permits > s->refs) {
        s->permits = s->refs;
    }
    pthread_mutex_unlock(&ps->mu);
}

void rlk_pubsub_set_linger(rlk_pubsub *ps, int64_t ms)
{
    pthread_mutex_lock(&ps->mu);
    ps->linger_ms = ms;
    pthread_mutex_unlock(&ps->mu);
    rlk_poke(ps);
}

uint64_t rlk_pubsub_messages(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    uint64_t n = ps->messages;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

size_t rlk_pubsub_channel_count(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    size_t n = ps->live;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

/* 1 if s should be subscribed: it has waiters or lingers, and Redis did not refuse it. */
int rlk_want(const rlk_sub *s)
{
    return (s->refs > 0 || s->lingering) && !s->refused;
}

rlk_sub *rlk_twin_of(rlk_pubsub *ps, const rlk_sub *n)
{
    if (n->twin == NULL) {
        return NULL;
    }
    rlk_sub *t = rlk_find(ps, n->twin, n->twin_len, 1);
    return t != NULL ? t : rlk_find(ps, n->twin, n->twin_len, 0);
}

void rlk_pubsub_fork_lock(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
}

void rlk_pubsub_fork_unlock(rlk_pubsub *ps)
{
    pthread_mutex_unlock(&ps->mu);
}

void rlk_sub_moved(rlk_pubsub *ps, rlk_sub *s)
{
    s->sent = 0;
    s->node = NULL;
    ps->refresh_due = 1;
    if (s->pending == 0 && rlk_want(s)) {
        rlk_mark_dirty(ps, s);
    } else if (s->pending == 0 && s->refs == 0 && !s->lingering && !s->dirty) {
        rlk_unlink_free(ps, s);
    }
}

uint64_t rlk_pubsub_confirms(rlk_pubsub *ps)
{
    return atomic_load(&ps->confirms);
}

void rlk_armed_begin(rlk_pubsub *ps, rlk_sub *s, rlk_armed *a)
{
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->mu);
    a->seen = s->wake_alls;
    pthread_mutex_unlock(&ps->mu);
}
