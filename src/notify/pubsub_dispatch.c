/*
 * The subscriber's dispatch (see pubsub.c): what Redis pushes on a subscriber connection, decoded
 * (a message, a pattern's message, a confirmation, an error reply) and turned into wake-up
 * permits, armed attempts or named wake-ups for the channel's entry. Runs on the subscriber thread
 * with the mutex held.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pubsub_dispatch.h"
#include "pubsub_armed.h"
#include "pubsub_impl.h"
#include "pubsub_decode.h"
#include "pubsub_requests.h"

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

/* 1 if the waiter a named wake-up names ("<uuid>:<tid>", tag_len bytes) is one of this
 * client's threads. */
static int named_here(const rlk_pubsub *ps, const char *tag, size_t tag_len)
{
    size_t n = strlen(ps->c->uuid);
    return tag_len > n && tag[n] == ':' && memcmp(tag, ps->c->uuid, n) == 0;
}

/* Reads a decimal number and the space after it at msg[*p] (advanced past both): 1, or 0 when
 * there is no digit, more than 19, or no space after them with a byte after it. */
static int grant_number(const char *msg, size_t len, size_t *p, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = *p, digits = 0;
    for (; i < len && msg[i] >= '0' && msg[i] <= '9' && digits < 19; i++, digits++) {
        v = v * 10 + (uint64_t)(msg[i] - '0');
    }
    if (digits == 0 || i + 1 >= len || msg[i] != ' ') {
        return 0;
    }
    *out = v;
    *p = i + 1;
    return 1;
}

int rlk_grant_parse(const char *msg, size_t len, uint64_t *token, uint64_t *wait, size_t *tag_at)
{
    static const char prefix[] = "grant ";
    size_t p = sizeof(prefix) - 1;
    if (len <= p || memcmp(msg, prefix, p) != 0 || !grant_number(msg, len, &p, token) ||
        !grant_number(msg, len, &p, wait)) {
        return 0;
    }
    *tag_at = p;
    return 1;
}

/* A grant on this client's wake channel ("grant <token> <wait> <uuid>:<tid>",
 * lua/lock_release.lua), or on a fair waiter's own channel (lua/fair_release.lua), for a waiter of
 * the lock channel twin: the named waiter holds the lock already. Asleep with the armed record of
 * that wait, it is woken alone with the grant. Asleep in another wait, it ignores the message: a
 * grant read late, after its waiter found it by an attempt of its own and has since released the
 * lock and waits again. Otherwise (between two attempts) the grant is kept on twin for that waiter
 * (rlk_grant_pending): its next rlk_sub_wait() returns it, unless its attempt in flight finds the
 * grant first (its own field in the lock hash, lua/lock_acquire.lua). Every waiter of twin gets
 * a permit too, for a waiter that sleeps without an armed record: a permit for one would go to
 * whichever local waiter takes it first, maybe not the granted one, which would then sleep until
 * its wait bound, by which its grant may have expired. Returns 0 when m is not a grant. Mutex
 * held. */
static int on_grant(rlk_pubsub *ps, rlk_sub *twin, const redisReply *m)
{
    uint64_t token = 0, wait = 0;
    size_t at = 0;
    if (!rlk_grant_parse(m->str, m->len, &token, &wait, &at)) {
        return 0;
    }
    const char *tag = m->str + at;
    size_t tag_len = m->len - at;
    if (!named_here(ps, tag, tag_len)) {
        return 1;
    }
    int r = rlk_grant_armed_tagged(ps, twin, tag, tag_len, wait, token);
    if (r == RLOCK_ECONN) {
        rlk_grant_pending(twin, tag, tag_len, wait, token);
        rlk_give_later(ps, twin, 1);
        twin->missed |= twin->refs == 0;
    }
    return 1;
}

/* A message on this client's wake channel (RLK_MSG_NAMED): an rlock release names the one
 * waiter it wakes, "<uuid>:<tid>", followed by " 0" when the release also publishes its "0" on
 * the twin channel (someone subscribed there plainly: a Redisson client). That "0" comes next
 * on this connection if the twin was subscribed when the release ran, which its confirmation
 * having been read already proves, and is then no wake-up here (rlk_on_reply lets it pass): the
 * name already woke its waiter. A named waiter that is not asleep with an armed attempt (between
 * two attempts, or no idle connection) gets a permit of the twin instead. Mutex held. */
static void on_named(rlk_pubsub *ps, rlk_ps_node *node, const rlk_sub *n, const redisReply *m)
{
    rlk_sub *twin = rlk_twin_of(ps, n);
    if (twin == NULL || m->type != REDIS_REPLY_STRING) {
        return;
    }
    if (on_grant(ps, twin, m)) {
        return;
    }
    size_t tag_len = m->len;
    if (tag_len > 2 && memcmp(m->str + tag_len - 2, " 0", 2) == 0) {
        tag_len -= 2;
        if (twin->sent && twin->pending == 0) {
            node->twin_next = twin;
        }
    }
    if (!named_here(ps, m->str, tag_len) ||
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
    /* Sharded pub/sub's pushes ("smessage", "ssubscribe", "sunsubscribe") mean the same. */
    kind += kind[0] == 's' && strcmp(kind, "subscribe") != 0;
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
static rlk_sub *find_push(rlk_pubsub *ps, int kind, const char *ch, size_t len)
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

/* Redis confirmed s's SUBSCRIBE or UNSUBSCRIBE (either kind) on node. Mutex held. */
static void on_confirm(rlk_pubsub *ps, rlk_ps_node *node, rlk_sub *s)
{
    (void)rlk_req_pop(node); /* answered in order: the oldest request is this one */
    if (s->pending > 0) {
        s->pending--;
    }
    if (s->pending == 0 && s->sent) {
        atomic_fetch_add(&ps->confirms, 1);
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

/* 1 if r, a confirmation for s read on node, is an "sunsubscribe" this client did not ask for:
 * Redis 7 drops a sharded subscription when its slot leaves the node. Mutex held. */
static int push_dropped(rlk_ps_node *node, const rlk_sub *s, const redisReply *r)
{
    if (strcmp(r->element[0]->str, "sunsubscribe") != 0) {
        return 0;
    }
    const rlk_ps_req *head = rlk_req_head(node);
    return head == NULL || head->s != s || head->subscribe;
}

void rlk_on_reply(rlk_pubsub *ps, rlk_ps_node *node, redisReply *r)
{
    /* A named wake-up's "0" is the reply right after the name, or it does not come at all. */
    rlk_sub *announced = node->twin_next;
    node->twin_next = NULL;
    const char *channel = NULL;
    size_t len = 0;
    const redisReply *m = NULL;
    int kind = rlk_push_parse(r, &channel, &len, &m);
    if (kind == RLK_PUSH_ERROR) {
        rlk_on_refused(ps, node, r);
        return;
    }
    if (kind == RLK_PUSH_MESSAGE || kind == RLK_PUSH_PMESSAGE) {
        /* Every message received, also one for a channel nobody listens on any more. */
        rlk_obs_count(ps->c, RLK_CNT_PUBSUB_MESSAGES);
    }
    rlk_sub *s = find_push(ps, kind, channel, len);
    if (s == NULL) {
        return;
    }
    if (kind == RLK_PUSH_MESSAGE || kind == RLK_PUSH_PMESSAGE) {
        ps->messages++;
        if (s->mode == RLK_MSG_NAMED) {
            on_named(ps, node, s, m);
            return;
        }
        if (s == announced && m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '0') {
            return; /* the wake-up it stands for was named just before */
        }
        if (s->mode == RLK_MSG_LOCK && m->type == REDIS_REPLY_STRING && on_grant(ps, s, m)) {
            return; /* a fair waiter's grant */
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
    } else if (push_dropped(node, s, r)) {
        rlk_log(ps->c, RLOCK_LOG_INFO, "subscriber: %s dropped by its node (slot moved?)",
                s->channel);
        rlk_sub_moved(ps, s);
    } else {
        on_confirm(ps, node, s);
    }
}
