/*
 * The subscriber's requests (see pubsub.c): SUBSCRIBE and UNSUBSCRIBE in the order they were
 * sent, so that an error reply can be matched to the request it refuses and an unconfirmed
 * SUBSCRIBE can be timed out, and what fails an entry's waiters when either happens. Everything
 * here runs on the subscriber thread with the mutex held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_map.h"
#include "pubsub_impl.h"
#include "pubsub_requests.h"

void rlk_req_clear(rlk_ps_node *node)
{
    node->req_head = node->req_count = 0;
}

/* Remembers a request sent for s, in order (thread, mutex held). RLOCK_ENOMEM if the ring
 * cannot grow: the request is then not sent. */
int rlk_req_push(rlk_ps_node *node, rlk_sub *s, int subscribe)
{
    if (node->req_count == node->req_cap) {
        size_t cap = node->req_cap ? 2 * node->req_cap : 64;
        rlk_ps_req *r = malloc(cap * sizeof(*r));
        if (r == NULL) {
            return RLOCK_ENOMEM;
        }
        for (size_t i = 0; i < node->req_count; i++) {
            r[i] = node->reqs[(node->req_head + i) % node->req_cap];
        }
        free(node->reqs);
        node->reqs = r;
        node->req_cap = cap;
        node->req_head = 0;
    }
    node->reqs[(node->req_head + node->req_count++) % node->req_cap] =
        (rlk_ps_req){.s = s, .sent_at = rlk_now_ms(), .subscribe = subscribe};
    return RLOCK_OK;
}

/* Takes the oldest request out: its reply arrived. NULL if none was outstanding. */
rlk_ps_req *rlk_req_pop(rlk_ps_node *node)
{
    if (node->req_count == 0) {
        return NULL;
    }
    rlk_ps_req *r = &node->reqs[node->req_head];
    node->req_head = (node->req_head + 1) % node->req_cap;
    node->req_count--;
    return r;
}

rlk_ps_req *rlk_req_head(rlk_ps_node *node)
{
    return node->req_count > 0 ? &node->reqs[node->req_head] : NULL;
}

/* Records why s's subscription failed and wakes its waiters. Mutex held. */
static void sub_fail_one(rlk_pubsub *ps, rlk_sub *s, int code, const char *msg)
{
    if (s->fail_code != 0 || s->refs == 0) {
        return;
    }
    s->fail_code = code;
    s->fail_msg = strdup(msg);
    rlk_give_later(ps, s, 1);
}

/* Records why s's subscription failed and wakes its waiters, who return code with the message.
 * Mutex held. */
static void sub_fail(rlk_pubsub *ps, rlk_sub *s, int code, const char *msg)
{
    /* Nobody waits on a wake channel: its failure is its twin's waiters'. */
    rlk_sub *twin = s->mode == RLK_MSG_NAMED ? rlk_twin_of(ps, s) : NULL;
    if (twin != NULL) {
        sub_fail_one(ps, twin, code, msg);
    }
    sub_fail_one(ps, s, code, msg);
}

/* Redis refused a PSUBSCRIBE (an ACL without the command, or a channel rule that names no such
 * pattern literally): s subscribes plainly instead, and so do this client's later pattern joins.
 * Its waiters still get every wake-up; only rlock's releases then publish to every waiting rlock
 * client again (PUBSUB NUMSUB counts this one). An informational line, not a warning: nothing
 * fails. Mutex held. */
static void pattern_refused(rlk_pubsub *ps, rlk_sub *s, const redisReply *r)
{
    rlk_log(ps->c, RLOCK_LOG_INFO,
            "subscriber: PSUBSCRIBE %s refused by Redis (%s); plain SUBSCRIBE", s->pat, r->str);
    ps->no_patterns = 1;
    if (s->pending > 0) {
        s->pending--;
    }
    s->pattern = 0; /* keyed by its channel already: the entry stays in its bucket */
    s->sent = 0;
    if (s->pending == 0 && rlk_want(s)) {
        rlk_mark_dirty(ps, s);
    } else if (s->pending == 0 && s->refs == 0 && !s->lingering && !s->dirty) {
        rlk_unlink_free(ps, s);
    }
}

/* A sharded client's SSUBSCRIBE answered MOVED or ASK: the node does not serve the channel's
 * slot (any more). Not a refusal: the entry is subscribed again where the map, read again, says
 * (a MOVED's target is recorded for that refresh, which may not have heard of the move yet). 1
 * if r was such a reply. Mutex held. */
static int request_redirected(rlk_pubsub *ps, rlk_sub *s, const redisReply *r)
{
    rlk_redirect rd;
    rlk_redirect_kind kind = rlk_cluster_parse_redirect(r->str, r->len, &rd);
    if (kind == RLK_REDIRECT_NONE) {
        return 0;
    }
    if (kind == RLK_REDIRECT_MOVED && rd.host[0] != '\0') {
        ps->moved_slot = rd.slot;
        snprintf(ps->moved_host, sizeof(ps->moved_host), "%s", rd.host);
        ps->moved_port = rd.port;
    }
    if (s->pending > 0) {
        s->pending--;
    }
    rlk_sub_moved(ps, s);
    return 1;
}

/* Redis refused a SUBSCRIBE or UNSUBSCRIBE (an ACL without the command or the channel). A
 * refused SUBSCRIBE fails its waiters at once, instead of leaving them asleep without wake-ups
 * until their deadline; it is not sent again while they wait. */
void rlk_on_refused(rlk_pubsub *ps, rlk_ps_node *node, const redisReply *r)
{
    rlk_ps_req *req = rlk_req_pop(node);
    if (req == NULL) {
        rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber: unexpected error reply: %s", r->str);
        return;
    }
    rlk_sub *s = req->s;
    if (s->pattern && req->subscribe) {
        pattern_refused(ps, s, r);
        return;
    }
    if (ps->sharded && request_redirected(ps, s, r)) {
        return;
    }
    rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber: %s %s refused by Redis: %s",
            req->subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", s->channel, r->str);
    if (s->pending > 0) {
        s->pending--;
    }
    if (req->subscribe) {
        char msg[512];
        snprintf(msg, sizeof(msg), "SUBSCRIBE %s refused by Redis: %s", s->channel, r->str);
        s->sent = 0;
        s->refused = s->refs > 0;
        sub_fail(ps, s, RLOCK_EREDIS, msg);
    }
    if (s->pending == 0 && !s->sent && s->refs == 0 && !s->lingering && !s->dirty) {
        rlk_unlink_free(ps, s);
    } else if (s->pending == 0 && rlk_want(s) != s->sent) {
        rlk_mark_dirty(ps, s);
    }
}

/* Fails the waiters of every SUBSCRIBE that Redis has not confirmed within
 * subscription_timeout_ms (a paused or overloaded server), and returns how long the thread may
 * sleep before the next one is due. Mutex held. */
static int64_t check_node(rlk_pubsub *ps, rlk_ps_node *node, int64_t now)
{
    int64_t limit = ps->c->opts.subscription_timeout_ms;
    for (size_t i = 0; i < node->req_count; i++) {
        rlk_ps_req *req = &node->reqs[(node->req_head + i) % node->req_cap];
        if (req->checked) {
            continue;
        }
        if (now - req->sent_at < limit) {
            return req->sent_at + limit - now;
        }
        /* An entry nobody waits on (lingering) is checked again later: a waiter may join it. */
        req->checked = !req->subscribe || !req->s->sent || req->s->refs > 0;
        if (req->subscribe && req->s->sent && req->s->refs > 0) {
            char msg[512];
            snprintf(msg, sizeof(msg),
                     "SUBSCRIBE %s not confirmed by Redis within %lld ms "
                     "(subscription_timeout_ms)",
                     req->s->channel, (long long)limit);
            rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber: %s", msg);
            sub_fail(ps, req->s, RLOCK_ECONN, msg);
        }
    }
    return INT64_MAX;
}

int64_t rlk_check_confirmations(rlk_pubsub *ps, int64_t now)
{
    int64_t due = INT64_MAX;
    for (size_t i = 0; i < ps->n_nodes; i++) {
        int64_t d = check_node(ps, ps->nodes[i], now);
        due = d < due ? d : due;
    }
    return due;
}
