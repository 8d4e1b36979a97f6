/*
 * The subscriber: one connection and one thread per client carry every channel local waiters
 * listen on. Waiter threads never touch the connection; they change entries under the mutex and
 * wake the thread through a pipe, and the thread sends SUBSCRIBE/UNSUBSCRIBE, reads messages and
 * hands out wake-up permits.
 *
 * An entry's permits make wake-ups durable: a message that arrives while its waiter is between
 * an attempt and its sleep leaves a permit, so the next wait returns at once. Permits never
 * exceed the number of local waiters, so a burst of messages costs at most one extra attempt
 * per waiter.
 *
 * Server state per entry: sent = what we last asked the server for (1 subscribed), pending =
 * replies still to come. An entry is live when sent == 1 and pending == 0; it is freed when no
 * waiter uses it and the server has confirmed the unsubscribe. After a reconnect every entry
 * with waiters is subscribed again, and its confirmation wakes all of them, because messages
 * published while the connection was down are lost.
 *
 * An entry whose last waiter left stays subscribed for RLK_PS_LINGER_MS (it lingers) before the
 * thread unsubscribes it. A thread that waits on the same channel again soon (a fair waiter's
 * private channel, a worker looping on one lock) then finds it live, which saves a SUBSCRIBE, an
 * UNSUBSCRIBE and the re-attempt that the confirmation would trigger. Because a lingering entry
 * stayed subscribed, a waiter that joins it can only have missed a message that arrived while
 * nobody waited; such a message (or a confirmation, which stands for messages published before
 * the subscription) sets `missed`, and the joiner gets one permit for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "reply_checks.h"
#include "pubsub_impl.h"
#include "sentinel.h"

static uint32_t rlk_hash(const char *p, size_t n)
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
static rlk_sub *rlk_find(rlk_pubsub *ps, const char *ch, size_t len, int pattern)
{
    for (rlk_sub *s = ps->buckets[rlk_hash(ch, len)]; s; s = s->next) {
        if (s->len == len && s->pattern == pattern && memcmp(s->channel, ch, len) == 0) {
            return s;
        }
    }
    return NULL;
}

/* Takes s out of the idle list (it gets a waiter again, expires, or is freed). */
static void rlk_idle_unlink(rlk_pubsub *ps, rlk_sub *s)
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
static void rlk_sub_destroy(rlk_pubsub *ps, rlk_sub *s)
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
    rlk_sub **pp = &ps->buckets[rlk_hash(s->channel, s->len)];
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

static void rlk_poke(rlk_pubsub *ps)
{
    char b = 1;
    ssize_t n = write(ps->wake[1], &b, 1);
    (void)n; /* A full pipe already guarantees a wake-up. */
}

/* Sets the permits. Waiters sleeping with an armed attempt sleep on their own condition
 * variables (so that answering a message with an armed attempt wakes only its owner), so they
 * are signalled here, with the mutex held; the others by the caller, on the entry's. */
static void rlk_set_permits(rlk_sub *s, int all)
{
    int target = all ? s->refs : s->permits + 1;
    s->permits = target > s->refs ? s->refs : target;
    for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
        pthread_cond_signal(&a->cv);
    }
}

/* Gives permits and wakes the entry's waiters at once (a joiner, with the mutex held). */
static void rlk_give(rlk_sub *s, int all)
{
    rlk_set_permits(s, all);
    pthread_cond_broadcast(&s->cv);
}

/* Gives permits from the thread; the waiters are woken by rlk_wake_given() once the mutex is
 * released, so that a woken waiter does not block on the mutex the thread still holds (on a
 * VM each extra sleep and wake-up costs tens of microseconds of the hand-off). */
void rlk_give_later(rlk_pubsub *ps, rlk_sub *s, int all)
{
    rlk_set_permits(s, all);
    if (s->refs > 0 && !s->waking) {
        s->waking = 1;
        s->next_wake = ps->wakes;
        ps->wakes = s;
    }
}

/* Called by the thread without the mutex. Safe: only this thread frees entries, and an entry
 * in the list had a waiter when it was added. */
static void rlk_wake_given(rlk_pubsub *ps)
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

int rlk_msg_permits(int mode, const redisReply *m)
{
    if (m->type != REDIS_REPLY_STRING || m->len == 0 || m->len > 20) {
        return 0;
    }
    char buf[24];
    memcpy(buf, m->str, m->len);
    buf[m->len] = '\0';
    char *end = NULL;
    long long n = strtoll(buf, &end, 10);
    if (*end != '\0') {
        return 0;
    }
    if (mode == RLK_MSG_ZERO_ALL) {
        return n == 0 ? INT_MAX : 0;
    }
    return n <= 0 ? 0 : n > INT_MAX ? INT_MAX : (int)n;
}

/* Adds k permits (at most one per waiter) from the thread; woken as rlk_give_later(). */
static void rlk_give_n_later(rlk_pubsub *ps, rlk_sub *s, int k)
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

/* The glob pattern that matches channel p (len bytes) and nothing else: Redis' special
 * characters escaped with a backslash. NUL-terminated, malloc()ed; NULL without memory. */
static char *rlk_literal_pattern(const char *p, size_t len, size_t *out_len)
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
static rlk_sub *rlk_sub_create(rlk_pubsub *ps, const char *channel, size_t len, int pattern)
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
    uint32_t h = rlk_hash(channel, len);
    s->next = ps->buckets[h];
    ps->buckets[h] = s;
    return s;
}

/* Joins channel's entry (plain, or through its literal pattern), creating it if needed. twin
 * (malloc()ed, taken over; NULL for none) is set before the mutex is released, so that the
 * confirmation of a new wake channel finds its twin. */
static int rlk_sub_join_kind(rlk_pubsub *ps, const char *channel, size_t len, int mode, int pattern,
                             char *twin, rlk_sub **out)
{
    *out = NULL;
    pthread_mutex_lock(&ps->mu);
    pattern = pattern && !ps->no_patterns;
    rlk_sub *s = rlk_find(ps, channel, len, pattern);
    if (s == NULL && (s = rlk_sub_create(ps, channel, len, pattern)) == NULL) {
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
            rlk_give(s, 0);
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
    return rlk_sub_join_kind(ps, channel, len, mode, 0, NULL, out);
}

int rlk_sub_join_pattern(rlk_pubsub *ps, const char *channel, size_t len, rlk_sub **out)
{
    return rlk_sub_join_kind(ps, channel, len, RLK_MSG_LOCK, 1, NULL, out);
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
    return rlk_sub_join_kind(ps, channel, len, RLK_MSG_NAMED, 0, copy, out);
}

/* The failure recorded for s, as the caller's error. Mutex held. */
static int rlk_sub_failure(const rlk_sub *s)
{
    return rlk_err(s->fail_code, "%s",
                   s->fail_msg != NULL ? s->fail_msg : "the channel's subscription failed");
}

int rlk_sub_wait(rlk_pubsub *ps, rlk_sub *s, int64_t timeout_ms, rlk_armed *armed)
{
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), timeout_ms);
    pthread_mutex_lock(&ps->mu);
    if (armed != NULL) {
        armed->state = RLK_ARMED_IDLE;
        armed->conn = NULL;
        armed->listed = 0;
    }
    /* A claimed attempt (state SENT; the claim unlinked it) wakes without a permit: permits
     * given meanwhile answer later messages and stay for the next wait. */
    while (s->permits == 0 && s->fail_code == 0 &&
           (armed == NULL || armed->state != RLK_ARMED_SENT) && !ps->interrupted) {
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
    rlk_armed_unlink(s, armed);
    if (armed != NULL && armed->state == RLK_ARMED_SENT) {
        pthread_mutex_unlock(&ps->mu);
        return rlk_armed_finish(ps, armed);
    }
    int r = RLK_WAIT_WOKEN;
    if (s->fail_code != 0) {
        r = rlk_sub_failure(s);
    } else if (s->permits == 0) {
        r = RLK_WAIT_INTERRUPTED; /* the permits stay for the waiters that are not */
    } else {
        s->permits--;
    }
    pthread_mutex_unlock(&ps->mu);
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
             * (rlk_expire_idle), and a poke here would wake it in the middle of a hand-off. */
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

/* Sends what the dirty entries need. Called by the thread with the mutex held; only queues
 * bytes in the connection's output buffer. */
static void rlk_flush_dirty(rlk_pubsub *ps)
{
    while (ps->dirty != NULL) {
        rlk_sub *s = ps->dirty;
        ps->dirty = s->next_dirty;
        s->dirty = 0;
        int want = rlk_want(s);
        if (want != s->sent && ps->conn != NULL) {
            if (rlk_req_push(ps, s, want) != RLOCK_OK) {
                rlk_mark_dirty(ps, s); /* no memory now: tried again at the next round */
                return;
            }
            const char *argv[2] = {want ? "SUBSCRIBE" : "UNSUBSCRIBE", s->channel};
            size_t lens[2] = {want ? 9u : 11u, s->len};
            if (s->pattern) {
                argv[0] = want ? "PSUBSCRIBE" : "PUNSUBSCRIBE";
                argv[1] = s->pat;
                lens[0]++;
                lens[1] = s->pat_len;
            }
            (void)rlk_conn_append(ps->conn, 2, argv, lens); /* a failure shows at the write */
            s->sent = want;
            s->pending++;
        }
        if (s->refs == 0 && !s->lingering && !s->sent && s->pending == 0) {
            rlk_unlink_free(ps, s);
        }
    }
}

/* 1 if the waiter a named wake-up names ("<uuid>:<tid>", tag_len bytes) is one of this
 * client's threads. */
static int rlk_named_here(const rlk_pubsub *ps, const char *tag, size_t tag_len)
{
    size_t n = strlen(ps->c->uuid);
    return tag_len > n && tag[n] == ':' && memcmp(tag, ps->c->uuid, n) == 0;
}

rlk_sub *rlk_twin_of(rlk_pubsub *ps, const rlk_sub *n)
{
    if (n->twin == NULL) {
        return NULL;
    }
    rlk_sub *t = rlk_find(ps, n->twin, n->twin_len, 1);
    return t != NULL ? t : rlk_find(ps, n->twin, n->twin_len, 0);
}

/* A message on this client's wake channel (RLK_MSG_NAMED): an rlock release names the one
 * waiter it wakes, "<uuid>:<tid>", followed by " 0" when the release also publishes its "0" on
 * the twin channel (someone subscribed there plainly: a Redisson client). That "0" comes next
 * on this connection if the twin was subscribed when the release ran, which its confirmation
 * having been read already proves, and is then no wake-up here (rlk_on_reply lets it pass): the
 * name already woke its waiter. A named waiter that is not asleep with an armed attempt (between
 * two attempts, or no idle connection) gets a permit of the twin instead. Mutex held. */
static void rlk_on_named(rlk_pubsub *ps, const rlk_sub *n, const redisReply *m)
{
    rlk_sub *twin = rlk_twin_of(ps, n);
    if (twin == NULL || m->type != REDIS_REPLY_STRING) {
        return;
    }
    size_t tag_len = m->len;
    if (tag_len > 2 && memcmp(m->str + tag_len - 2, " 0", 2) == 0) {
        tag_len -= 2;
        if (twin->sent && twin->pending == 0) {
            ps->twin_next = twin;
        }
    }
    if (!rlk_named_here(ps, m->str, tag_len) ||
        rlk_claim_armed_tagged(ps, twin, m->str, tag_len) == RLOCK_OK) {
        return;
    }
    rlk_give_later(ps, twin, 0);
    twin->missed |= twin->refs == 0;
}

int rlk_push_parse(const redisReply *r, const char **channel, size_t *len,
                   const redisReply **payload)
{
    if (r->type == REDIS_REPLY_ERROR) {
        return RLK_PUSH_ERROR;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        return RLK_PUSH_OTHER;
    }
    const char *kind = r->element[0]->str;
    *channel = r->element[1]->str;
    *len = r->element[1]->len;
    *payload = r->element[2];
    if (strcmp(kind, "message") == 0) {
        return RLK_PUSH_MESSAGE;
    }
    if (strcmp(kind, "subscribe") == 0 || strcmp(kind, "unsubscribe") == 0) {
        return RLK_PUSH_CONFIRM;
    }
    if (strcmp(kind, "psubscribe") == 0 || strcmp(kind, "punsubscribe") == 0) {
        return RLK_PUSH_PCONFIRM;
    }
    /* A pattern's message: pattern, the channel it was published on, payload. */
    if (strcmp(kind, "pmessage") == 0 && r->elements >= 4 &&
        r->element[2]->type == REDIS_REPLY_STRING) {
        *channel = r->element[2]->str;
        *len = r->element[2]->len;
        *payload = r->element[3];
        return RLK_PUSH_PMESSAGE;
    }
    return RLK_PUSH_OTHER;
}

int rlk_msg_wakes_all(const redisReply *m)
{
    return m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '1';
}

/* The entry a push is about. A pattern's confirmation names the pattern: the channel with a
 * backslash before each glob character. Mutex held. */
static rlk_sub *rlk_find_push(rlk_pubsub *ps, int kind, const char *ch, size_t len)
{
    if (kind != RLK_PUSH_PCONFIRM) {
        return kind == RLK_PUSH_OTHER ? NULL : rlk_find(ps, ch, len, kind == RLK_PUSH_PMESSAGE);
    }
    char *raw = malloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; raw != NULL && i < len; i++) {
        i += ch[i] == '\\' && i + 1 < len;
        raw[n++] = ch[i];
    }
    rlk_sub *s = raw != NULL ? rlk_find(ps, raw, n, 1) : NULL;
    free(raw);
    return s;
}

/* Redis confirmed s's SUBSCRIBE or UNSUBSCRIBE (either kind). Mutex held. */
static void rlk_on_confirm(rlk_pubsub *ps, rlk_sub *s)
{
    (void)rlk_req_pop(ps); /* answered in order: the oldest request is this one */
    if (s->pending > 0) {
        s->pending--;
    }
    if (s->pending == 0 && s->sent && s->refs > 0) {
        /* Confirmed: every waiter re-attempts now that no release can go unnoticed (a late
         * confirmation also ends a subscription_timeout_ms failure, but not a refusal, which
         * may be its wake channel's). A wake channel stands for its twin's waiters: a release
         * that named one of them before it was live reached nobody, and an rlock release need
         * not publish on the twin at all. */
        if (s->fail_code == RLOCK_ECONN) {
            s->fail_code = 0;
            free(s->fail_msg);
            s->fail_msg = NULL;
        }
        rlk_give_later(ps, s, 1);
        rlk_sub *twin = s->mode == RLK_MSG_NAMED ? rlk_twin_of(ps, s) : NULL;
        if (twin != NULL && twin->refs > 0) {
            rlk_give_later(ps, twin, 1);
        }
    } else if (s->pending == 0 && s->sent) {
        /* Confirmed while nobody waits: the next joiner re-attempts once instead. */
        s->missed = 1;
    }
    if (s->pending == 0 && !s->sent && s->refs == 0 && !s->lingering && !s->dirty) {
        rlk_unlink_free(ps, s);
    } else if (rlk_want(s) != s->sent) {
        rlk_mark_dirty(ps, s);
    }
}

/* Handles one reply read from the subscriber connection. Mutex held. */
static void rlk_on_reply(rlk_pubsub *ps, redisReply *r)
{
    /* A named wake-up's "0" is the reply right after the name, or it does not come at all. */
    rlk_sub *announced = ps->twin_next;
    ps->twin_next = NULL;
    const char *channel = NULL;
    size_t len = 0;
    const redisReply *m = NULL;
    int kind = rlk_push_parse(r, &channel, &len, &m);
    if (kind == RLK_PUSH_ERROR) {
        rlk_on_refused(ps, r);
        return;
    }
    rlk_sub *s = rlk_find_push(ps, kind, channel, len);
    if (s == NULL) {
        return;
    }
    if (kind == RLK_PUSH_MESSAGE || kind == RLK_PUSH_PMESSAGE) {
        ps->messages++;
        if (s->mode == RLK_MSG_NAMED) {
            rlk_on_named(ps, s, m);
            return;
        }
        if (s == announced && m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '0') {
            return; /* the wake-up it stands for was named just before */
        }
        if (s->mode != RLK_MSG_LOCK) {
            rlk_give_n_later(ps, s, rlk_msg_permits(s->mode, m));
            s->missed |= s->refs == 0;
            return;
        }
        int all = rlk_msg_wakes_all(m);
        if (!all && s->armed_head != NULL && rlk_claim_armed(ps, s) == RLOCK_OK) {
            /* "0" wakes one waiter: the armed attempt answers it instead of a permit, so that
             * a message arriving after this point (published after the attempt was sent) gives
             * a new one. rlk_send_armed() wakes its owner alone. */
        } else {
            rlk_give_later(ps, s, all);
        }
        s->missed |= s->refs == 0;
    } else {
        rlk_on_confirm(ps, s);
    }
}

/* Forgets the server's state after the connection broke: nothing is subscribed any more. */
static void rlk_reset_entries(rlk_pubsub *ps)
{
    rlk_req_clear(ps);
    ps->twin_next = NULL;
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = ps->buckets[i];
        while (s != NULL) {
            rlk_sub *n = s->next;
            s->sent = 0;
            s->pending = 0;
            rlk_idle_unlink(ps, s); /* nobody waits: nothing to resubscribe */
            if (s->refs > 0) {
                rlk_mark_dirty(ps, s);
            } else if (!s->dirty) {
                rlk_unlink_free(ps, s);
            }
            s = n;
        }
    }
}

static void rlk_disconnect(rlk_pubsub *ps, const char *why)
{
    rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber connection lost (%s); resubscribing", why);
    rlk_conn_close(ps->conn);
    ps->conn = NULL;
    rlk_reset_entries(ps);
}

/* Waits for the wake pipe, the socket (if connected) and the Sentinel subscription (sfd >= 0) up
 * to timeout_ms; *srev gets the Sentinel socket's events. Mutex not held. */
static int rlk_ps_poll(rlk_pubsub *ps, int fd, int want_write, int timeout_ms, int sfd, short *srev)
{
    struct pollfd pfd[3] = {{.fd = ps->wake[0], .events = POLLIN},
                            {.fd = fd, .events = (short)(POLLIN | (want_write ? POLLOUT : 0))},
                            {.fd = sfd, .events = POLLIN}};
    int n = poll(pfd, 3, timeout_ms); /* a negative fd is ignored by poll() */
    if (n > 0 && (pfd[0].revents & POLLIN)) {
        char buf[64];
        while (read(ps->wake[0], buf, sizeof(buf)) > 0) {
        }
    }
    if (srev != NULL) {
        *srev = 0;
        if (n > 0 && sfd >= 0) {
            *srev = pfd[2].revents;
        }
    }
    return n > 0 && fd >= 0 ? pfd[1].revents : 0;
}

static void rlk_ps_connect(rlk_pubsub *ps)
{
    /* Writes are bounded by the connect timeout too: the thread only ever writes the few bytes
     * of SUBSCRIBE/UNSUBSCRIBE, and reads only what poll() says has arrived. */
    rlk_conn *conn = NULL;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), ps->c->opts.connect_timeout_ms);
    /* Read before the dial: a switch during it leaves the connection stale, moved next round. */
    unsigned master = atomic_load(&ps->c->master_gen);
    int r = rlk_conn_open(ps->c, deadline, ps->c->opts.connect_timeout_ms, &conn);
    pthread_mutex_lock(&ps->mu);
    if (r == RLOCK_OK) {
        ps->conn = conn;
        ps->conn_master = master;
        ps->backoff_ms = 0;
        rlk_reset_entries(ps);
    } else {
        ps->backoff_ms = ps->backoff_ms ? ps->backoff_ms * 2 : 10;
        ps->backoff_ms = ps->backoff_ms > 1000 ? 1000 : ps->backoff_ms;
    }
    int64_t wait = ps->backoff_ms;
    pthread_mutex_unlock(&ps->mu);
    if (r != RLOCK_OK) {
        rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber cannot connect: %s", rlock_last_error());
        rlk_sentinel_recheck(ps->c);
        rlk_ps_poll(ps, -1, 0, (int)wait, -1, NULL);
    }
}

/* Unsubscribes the entries that lingered long enough; returns how long the thread may sleep:
 * until the oldest lingering entry is due or, while any entry exists (one may start lingering
 * meanwhile, without waking the thread), one linger period. Mutex held. */
static int64_t rlk_expire_idle(rlk_pubsub *ps)
{
    int64_t now = rlk_now_ms();
    while (ps->idle_head != NULL && now - ps->idle_head->idle_since >= ps->linger_ms) {
        rlk_sub *s = ps->idle_head;
        rlk_idle_unlink(ps, s);
        rlk_mark_dirty(ps, s);
    }
    int64_t left = ps->idle_head != NULL ? ps->idle_head->idle_since + ps->linger_ms - now
                   : ps->entries > 0     ? ps->linger_ms
                                         : 1000;
    return left > 1000 ? 1000 : left;
}

/* 1 (after dropping the connection) if the client moved to a new master since the connection was
 * dialled: the reconnect subscribes every channel with waiters on the new master, and each
 * confirmation wakes all of that channel's waiters to re-attempt once, since a release on either
 * master during the move may have published where nobody listened. Mutex held. */
static int rlk_ps_moved(rlk_pubsub *ps)
{
    if (ps->conn == NULL || ps->conn_master == atomic_load(&ps->c->master_gen)) {
        return 0;
    }
    rlk_log(ps->c, RLOCK_LOG_INFO, "subscriber: the master moved; resubscribing there");
    rlk_conn_close(ps->conn);
    ps->conn = NULL;
    rlk_reset_entries(ps);
    return 1;
}

/* Reads the Sentinel subscription if poll() said so, and moves at once if that switched the
 * master. Mutex not held. */
static void rlk_ps_sentinel(rlk_pubsub *ps, short srev)
{
    if (!(srev & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    rlk_sentinel_watch_read(ps->c, &ps->watch);
    pthread_mutex_lock(&ps->mu);
    (void)rlk_ps_moved(ps);
    pthread_mutex_unlock(&ps->mu);
}

/* One round of the connected loop: send, wait, read. */
static void rlk_ps_step(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    if (rlk_ps_moved(ps)) {
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    int64_t timeout = rlk_expire_idle(ps);
    int64_t due = rlk_check_confirmations(ps, rlk_now_ms());
    timeout = due < timeout ? due : timeout;
    rlk_flush_dirty(ps);
    rlk_conn *conn = ps->conn;
    pthread_mutex_unlock(&ps->mu);
    rlk_wake_given(ps); /* waiters of a subscription that just timed out */
    int done = 0;
    if (rlk_conn_flush(conn, &done) != RLOCK_OK) {
        pthread_mutex_lock(&ps->mu);
        rlk_disconnect(ps, rlock_last_error());
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    short srev = 0;
    int sfd = rlk_sentinel_watch_fd(ps->c, &ps->watch);
    int ev = rlk_ps_poll(ps, rlk_conn_fd(conn), !done, (int)timeout, sfd, &srev);
    if (srev != 0) {
        rlk_ps_sentinel(ps, srev);
        return; /* the data connection is read next round (it may have moved) */
    }
    if (!(ev & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    int rr = rlk_conn_fill(conn); /* the connection is the thread's own: no mutex needed */
    pthread_mutex_lock(&ps->mu);
    if (rr != RLOCK_OK) {
        rlk_disconnect(ps, rlock_last_error());
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    redisReply *rep = NULL;
    while (rlk_conn_next(conn, &rep) == RLOCK_OK && rep != NULL) {
        rlk_on_reply(ps, rep);
        freeReplyObject(rep);
    }
    if (rlk_conn_broken(conn)) {
        rlk_disconnect(ps, rlock_last_error());
    }
    pthread_mutex_unlock(&ps->mu);
    rlk_wake_given(ps);
    rlk_send_armed(ps);
}

static void *rlk_ps_main(void *arg)
{
    rlk_pubsub *ps = arg;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        int running = ps->running;
        int connected = ps->conn != NULL;
        pthread_mutex_unlock(&ps->mu);
        if (!running) {
            break;
        }
        if (!connected) {
            rlk_ps_connect(ps);
        } else {
            rlk_ps_step(ps);
        }
    }
    return NULL;
}

int rlk_pubsub_new(rlock_client *c, rlk_pubsub **out)
{
    rlk_pubsub *ps = calloc(1, sizeof(*ps));
    if (ps == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the subscriber");
    }
    ps->c = c;
    ps->running = 1;
    ps->linger_ms = RLK_PS_LINGER_MS;
    if (pipe(ps->wake) != 0) {
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot create the subscriber's wake pipe: %s",
                       strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(ps->wake[i], F_SETFL, fcntl(ps->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(ps->wake[i], F_SETFD, FD_CLOEXEC);
    }
    pthread_mutex_init(&ps->mu, NULL);
    if (pthread_create(&ps->thread, NULL, rlk_ps_main, ps) != 0) {
        close(ps->wake[0]);
        close(ps->wake[1]);
        pthread_mutex_destroy(&ps->mu);
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot start the subscriber thread");
    }
    *out = ps;
    return RLOCK_OK;
}

void rlk_pubsub_free(rlk_pubsub *ps)
{
    if (ps == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->mu);
    ps->running = 0;
    pthread_mutex_unlock(&ps->mu);
    rlk_poke(ps);
    pthread_join(ps->thread, NULL);
    rlk_conn_close(ps->conn);
    rlk_sentinel_watch_close(&ps->watch);
    free(ps->reqs);
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = NULL;
        while ((s = ps->buckets[i]) != NULL) {
            ps->buckets[i] = s->next;
            rlk_sub_destroy(ps, s);
        }
    }
    close(ps->wake[0]);
    close(ps->wake[1]);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}

void rlk_pubsub_abandon(rlk_pubsub *ps)
{
    if (ps == NULL) {
        return;
    }
    /* The thread does not exist in this process; its connection is the parent's too. */
    rlk_conn_abandon(ps->conn);
    rlk_sentinel_watch_abandon(&ps->watch);
    free(ps->reqs);
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = NULL;
        while ((s = ps->buckets[i]) != NULL) {
            ps->buckets[i] = s->next;
            /* Not rlk_sub_destroy(): the entry's condition variable may count the parent's
             * waiters, which do not exist here, and destroying it would wait for them. */
            free(s->fail_msg);
            free(s->twin);
            free(s->pat);
            free(s->channel);
            free(s);
        }
    }
    /* The armed attempts of the parent's waiters are theirs: left alone, as their memory. */
    close(ps->wake[0]);
    close(ps->wake[1]);
    free(ps);
}

void rlk_pubsub_fork_lock(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
}

void rlk_pubsub_fork_unlock(rlk_pubsub *ps)
{
    pthread_mutex_unlock(&ps->mu);
}
