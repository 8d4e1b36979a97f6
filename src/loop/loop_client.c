/*
 * A loop client (loop_client.h): creation, the free that completes every pending operation, the
 * data connection, the pub/sub connection and its channels, and the self-pipe that brings a
 * fired token to the loop. Static helpers are named loop_*.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_map.h"
#include "cluster_slot.h"
#include "error.h"
#include "loop_client.h"
#include "loop_cluster.h"
#include "loop_due.h"
#include "loop_route.h"
#include "loop_sentinel.h"
#include "loop_shard.h"
#include "loop_hold.h"
#include "observe.h"
#include "scripts.h"
#include "tls.h"

rlk_loop_client *rlk_loop_of(const rlock_client *c)
{
    return c->loop;
}

static void loop_ignore_reply(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

/* The URL a data or pub/sub connection dials: on a Sentinel deployment the current master, on
 * a cluster the home node (classic PUBLISH reaches every node), with host NULL (a parked
 * connection, loop_conn.h) while none is known; host has RLK_HOST_MAX bytes. */
static rlk_url loop_node_url(const rlk_loop_client *lc, char *host)
{
    rlk_url u = lc->c->url;
    if (u.kind == RLK_URL_SENTINEL) {
        rlk_client_master(lc->c, host, &u.port);
        u.host = host[0] != '\0' ? host : NULL;
    } else if (u.kind == RLK_URL_CLUSTER) {
        int known = lc->cluster != NULL && rlk_loop_cluster_home(lc->cluster, host, &u.port) == 0;
        u.host = known ? host : NULL;
        u.path = NULL;
    }
    return u;
}

/* ---- channels -------------------------------------------------------------------------- */

static rlk_loop_chan *loop_chan_find(rlk_loop_client *lc, const char *name, size_t len)
{
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        if (ch->len == len && memcmp(ch->name, name, len) == 0) {
            return ch;
        }
    }
    return NULL;
}

void rlk_loop_chan_drop_if_idle(rlk_loop_client *lc, rlk_loop_chan *ch)
{
    if (ch->wanted || ch->waiters != NULL || ch->sent != ch->seen || ch->usent != ch->useen ||
        ch->waking) {
        return;
    }
    for (rlk_loop_chan **p = &lc->chans; *p != NULL; p = &(*p)->next) {
        if (*p == ch) {
            *p = ch->next;
            free(ch);
            return;
        }
    }
}

/* The pub/sub connection ch's requests go on: the client's one, or in sharded pub/sub the
 * connection to the master it is subscribed on. */
static rlk_lconn *loop_chan_conn(const rlk_loop_client *lc, const rlk_loop_chan *ch)
{
    return !lc->c->sharded ? lc->sub : rlk_loop_shard_conn(ch->shard);
}

/* Sends one (UN)SUBSCRIBE request of ch's (on: a subscription) and counts it in sent or usent. */
static int loop_chan_send_one(rlk_loop_client *lc, rlk_loop_chan *ch, const char *verb,
                              const char *name, size_t len, int on)
{
    const char *argv[2] = {verb, name};
    size_t lens[2] = {strlen(verb), len};
    rlk_lconn *conn = loop_chan_conn(lc, ch);
    int r = conn != NULL ? rlk_lconn_command(conn, 2, argv, lens, NULL, NULL)
                         : rlk_err(RLOCK_ECONN, "no pub/sub connection for %s", ch->name);
    if (r == RLOCK_OK) {
        *(on ? &ch->sent : &ch->usent) += 1;
    }
    return r;
}

static const char *loop_chan_key(const rlk_loop_chan *ch)
{
    return ch->name + ch->len + 1;
}

/* Sends ch's SUBSCRIBE (on 1) or UNSUBSCRIBE (on 0): their sharded forms in sharded pub/sub; a
 * named channel's (classic only) pattern by the P form, then its wake channel (made from the key
 * as rlk_prefix_name() makes names, not kept: a wait's share of the record stays small). sent
 * and usent count each request. */
int rlk_loop_chan_send(rlk_loop_client *lc, rlk_loop_chan *ch, int on)
{
    static const char *const verbs[3][2] = {{"UNSUBSCRIBE", "SUBSCRIBE"},
                                            {"SUNSUBSCRIBE", "SSUBSCRIBE"},
                                            {"PUNSUBSCRIBE", "PSUBSCRIBE"}};
    on = on != 0;
    if (ch->wake_prefix == NULL) {
        return loop_chan_send_one(lc, ch, verbs[lc->c->sharded != 0][on], ch->name, ch->len, on);
    }
    rlk_buf wake;
    rlk_buf_init(&wake);
    int r = loop_chan_send_one(lc, ch, verbs[2][on], ch->name, ch->len, on);
    r = r ? r : rlk_prefix_name(&wake, ch->wake_prefix, loop_chan_key(ch), ch->key_len);
    r = r ? r : rlk_buf_appends(&wake, ":");
    r = r ? r : rlk_buf_appends(&wake, lc->c->uuid);
    r = r ? r : loop_chan_send_one(lc, ch, verbs[0][on], wake.p, wake.len, on);
    rlk_buf_free(&wake);
    return r;
}

/* 1 when s (len bytes) is ch's wake channel, "<wake_prefix>:{key}:<uuid>" ("<prefix>:key:..."
 * for a key with a hash tag of its own). */
static int loop_chan_is_wake(const rlk_loop_client *lc, const rlk_loop_chan *ch, const char *s,
                             size_t len)
{
    const char *key = loop_chan_key(ch), *uuid = lc->c->uuid;
    size_t p = strlen(ch->wake_prefix), u = strlen(uuid), k = ch->key_len;
    size_t braced = memchr(key, '{', k) == NULL;
    if (len != p + 1 + k + 2 * braced + 1 + u || memcmp(s, ch->wake_prefix, p) != 0 ||
        s[p] != ':' || s[len - u - 1] != ':' || memcmp(s + len - u, uuid, u) != 0) {
        return 0;
    }
    const char *q = s + p + 1 + braced;
    return memcmp(q, key, k) == 0 && (!braced || (q[-1] == '{' && q[k] == '}'));
}

/* The named channel whose wake channel is name, NULL if none. */
static rlk_loop_chan *loop_chan_find_wake(rlk_loop_client *lc, const char *name, size_t len)
{
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        if (ch->wake_prefix != NULL && loop_chan_is_wake(lc, ch, name, len)) {
            return ch;
        }
    }
    return NULL;
}

/* Wakes every waiter of ch once with why; a waiter may leave (or complete) while it is woken,
 * so each wake starts over from the first waiter not yet woken; a done that freed the client
 * ends the round. */
static void loop_chan_wake(rlk_loop_client *lc, rlk_loop_chan *ch, int why)
{
    for (rlk_loop_op *op = ch->waiters; op != NULL; op = op->cnext) {
        op->mark = 1;
    }
    ch->waking = 1;
    for (;;) {
        rlk_loop_op *op = ch->waiters;
        while (op != NULL && !op->mark) {
            op = op->cnext;
        }
        if (op == NULL) {
            ch->waking = 0;
            rlk_loop_chan_drop_if_idle(lc, ch);
            return;
        }
        op->mark = 0;
        rlk_loop_cb_enter(lc);
        op->type->wake(op, why);
        if (rlk_loop_cb_leave(lc)) {
            return;
        }
    }
}

/* A message on ch's wake channel: to the first waiter that takes it, else to unclaimed, else
 * to every waiter (a done run by a taker may free the client: nothing is touched after). */
static void loop_chan_tell(rlk_loop_client *lc, rlk_loop_chan *ch, const redisReply *m)
{
    if (m->type != REDIS_REPLY_STRING) {
        return;
    }
    for (rlk_loop_op *op = ch->waiters; op != NULL; op = op->cnext) {
        if (op->type->told != NULL) {
            rlk_loop_cb_enter(lc);
            int took = op->type->told(op, m->str, m->len);
            if (rlk_loop_cb_leave(lc) || took) {
                return;
            }
        }
    }
    rlk_loop_cb_enter(lc);
    int dealt = ch->unclaimed(lc, loop_chan_key(ch), ch->key_len, m->str, m->len);
    if (!rlk_loop_cb_leave(lc) && !dealt && ch->wanted) {
        loop_chan_wake(lc, ch, RLK_LOOP_MESSAGE);
    }
}

/* A pushed message of the pub/sub connection, or of shard sh's (its kinds are the classic ones
 * with an s before them; a channel subscribed elsewhere now ignores it). A named channel's
 * pattern kinds (classic only) have a p before them. */
void rlk_loop_push(rlk_loop_client *lc, rlk_loop_shard *sh, redisReply *rep)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        rep->element[1]->type != REDIS_REPLY_STRING) {
        return;
    }
    const char *kind = rep->element[0]->str + (sh != NULL);
    const redisReply *name = rep->element[1];
    rlk_loop_chan *ch = loop_chan_find(lc, name->str, name->len);
    rlk_loop_chan *named =
        ch == NULL && sh == NULL ? loop_chan_find_wake(lc, name->str, name->len) : NULL;
    if (sh == NULL && kind[0] == 'p') { /* a named channel's pattern */
        kind++;
    }
    ch = ch != NULL ? ch : named;
    if (ch == NULL || ch->shard != sh) {
        return;
    }
    if (sh != NULL && strcmp(kind, "unsubscribe") == 0 && ch->useen == ch->usent) {
        rlk_loop_shard_dropped(lc, ch); /* not asked for: the server dropped it (its slot moved) */
    } else if (strcmp(kind, "subscribe") == 0) {
        lc->sub_backoff_ms = 0;
        ch->seen++;
        if (ch->wanted && ch->seen == ch->sent) {
            loop_chan_wake(lc, ch, RLK_LOOP_SUBSCRIBED);
        }
    } else if (strcmp(kind, "unsubscribe") == 0) {
        ch->useen++;
        rlk_loop_chan_drop_if_idle(lc, ch);
    } else if (named != NULL && strcmp(kind, "message") == 0 && rep->elements == 3) {
        loop_chan_tell(lc, named, rep->element[2]);
    } else if (strcmp(kind, "message") == 0 && ch->wanted) {
        loop_chan_wake(lc, ch, RLK_LOOP_MESSAGE);
    }
}

static void loop_sub_down(void *arg, int err);

static void loop_on_push(void *arg, redisReply *rep)
{
    rlk_loop_client *lc = arg;
    if (rep->type == REDIS_REPLY_ERROR) { /* a refused SUBSCRIBE: dialled again later */
        loop_sub_down(lc, rlk_err(RLOCK_EPROTO, "pub/sub refused: %s", rep->str));
        return;
    }
    rlk_loop_push(lc, NULL, rep);
}

/* Starts the redial timer with the next back-off: 50 ms, doubling up to 2 s. */
void rlk_loop_sub_retry(rlk_loop_client *lc)
{
    int64_t d = lc->sub_backoff_ms;
    d = d < 50 ? 50 : d * 2 > 2000 ? 2000 : d * 2;
    lc->sub_backoff_ms = d;
    (void)lc->loop.timer_start(lc->sub_timer, d);
}

/* The pub/sub connection broke: its subscriptions are gone. The waiters keep their timers, and
 * the redial timer (or the next request on the data connection) dials it again and resubscribes
 * (loop_sub_ensure), so a server that stays down is dialled at a back-off's pace. */
static void loop_sub_down(void *arg, int err)
{
    rlk_loop_client *lc = arg;
    rlk_lconn_free(lc->sub, err);
    lc->sub = NULL;
    rlk_loop_chan *next = NULL;
    int wanted = 0;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = next) {
        next = ch->next;
        ch->sent = ch->seen = ch->usent = ch->useen = 0;
        wanted |= ch->wanted;
        rlk_loop_chan_drop_if_idle(lc, ch);
    }
    if (wanted) {
        rlk_loop_sub_retry(lc);
    }
}

static int loop_sub_ensure(rlk_loop_client *lc);

/* The redial timer: the waiters wake on the new subscriptions' confirmations and attempt. */
static void loop_on_sub_timer(void *arg)
{
    rlk_loop_client *lc = arg;
    int wanted = 0;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        wanted |= ch->wanted;
    }
    if (wanted && lc->sub == NULL && loop_sub_ensure(lc) != RLOCK_OK) {
        rlk_loop_sub_retry(lc);
    }
}

static int loop_sub_ensure(rlk_loop_client *lc)
{
    if (lc->c->sharded) {
        return rlk_loop_shards_ensure(lc);
    }
    if (lc->sub != NULL) {
        return RLOCK_OK;
    }
    rlk_lconn_cbs cbs = {.push = loop_on_push,
                         .down = loop_sub_down,
                         .arg = lc,
                         .connect_timeout_ms = lc->c->opts.connect_timeout_ms,
                         .command_timeout_ms = lc->c->opts.command_timeout_ms,
                         .tls = lc->c->tls};
    char host[RLK_HOST_MAX];
    rlk_url u = loop_node_url(lc, host);
    int r = rlk_lconn_new(&lc->loop, &u, &cbs, &lc->sub);
    for (rlk_loop_chan *ch = lc->chans; ch != NULL && r == RLOCK_OK; ch = ch->next) {
        r = ch->wanted ? rlk_loop_chan_send(lc, ch, 1) : RLOCK_OK;
    }
    return r;
}

/* The channel record of name (named: its wake prefix and key, NULL for a plain one), made when
 * there is none. */
static rlk_loop_chan *loop_chan_get(rlk_loop_client *lc, const char *name, size_t len,
                                    const rlk_loop_named *named)
{
    rlk_loop_chan *ch = loop_chan_find(lc, name, len);
    if (ch != NULL) {
        return ch;
    }
    size_t extra = named != NULL ? named->key_len + 1 : 0;
    if ((ch = calloc(1, sizeof(*ch) + len + 1 + extra)) == NULL) {
        (void)rlk_err(RLOCK_ENOMEM, "out of memory joining a channel");
        return NULL;
    }
    memcpy(ch->name, name, len);
    ch->len = len;
    ch->slot = rlk_cluster_key_slot(name, len);
    if (named != NULL) {
        memcpy(ch->name + len + 1, named->key, named->key_len);
        ch->wake_prefix = named->wake_prefix;
        ch->key_len = named->key_len;
        ch->unclaimed = named->unclaimed;
    }
    ch->next = lc->chans;
    lc->chans = ch;
    return ch;
}

/* Adds op to ch's waiters, subscribing when it is new (as rlk_loop_join()). */
static int loop_chan_join(rlk_loop_client *lc, rlk_loop_chan *ch, rlk_loop_op *op)
{
    int live = ch->wanted && ch->seen == ch->sent;
    op->chan = ch;
    op->cprev = NULL;
    op->cnext = ch->waiters;
    if (ch->waiters != NULL) {
        ch->waiters->cprev = op;
    }
    ch->waiters = op;
    if (ch->wanted) {
        return live;
    }
    ch->wanted = 1;
    if (lc->c->sharded) {
        return rlk_loop_shard_subscribe(lc, ch);
    }
    int r = loop_sub_ensure(lc);
    /* A new connection subscribed every wanted channel, this one included. */
    r = r || ch->sent > ch->seen ? r : rlk_loop_chan_send(lc, ch, 1);
    return r;
}

int rlk_loop_join(rlk_loop_op *op, const char *channel, size_t len)
{
    rlk_loop_chan *ch = loop_chan_get(op->lc, channel, len, NULL);
    return ch == NULL ? RLOCK_ENOMEM : loop_chan_join(op->lc, ch, op);
}

int rlk_loop_join_named(rlk_loop_op *op, const char *pattern, size_t len,
                        const rlk_loop_named *named)
{
    rlk_loop_chan *ch = loop_chan_get(op->lc, pattern, len, named);
    return ch == NULL ? RLOCK_ENOMEM : loop_chan_join(op->lc, ch, op);
}

void rlk_loop_leave(rlk_loop_op *op)
{
    rlk_loop_chan *ch = op->chan;
    if (ch == NULL) {
        return;
    }
    *(op->cprev != NULL ? &op->cprev->cnext : &ch->waiters) = op->cnext;
    if (op->cnext != NULL) {
        op->cnext->cprev = op->cprev;
    }
    op->chan = NULL;
    op->cprev = op->cnext = NULL;
    if (ch->waiters == NULL && ch->wanted) {
        ch->wanted = 0;
        if (rlk_lconn_ok(loop_chan_conn(op->lc, ch))) {
            (void)rlk_loop_chan_send(op->lc, ch, 0);
        }
        rlk_loop_chan_drop_if_idle(op->lc, ch);
    }
}

/* ---- the data connection and scripts --------------------------------------------------- */

/* The data connection broke. One that the server had answered is dialled again at the next
 * request; one that got no reply (refused, timed out, TLS refused) makes the next dial wait
 * 50 ms, doubling up to 2 s, and the requests before then fail at once with RLOCK_ECONN: a
 * server that is down sees a few dials, not one per request. */
static void loop_data_back_off(rlk_loop_client *lc, int replied)
{
    int64_t d = lc->data_backoff_ms;
    d = replied ? 0 : d < 50 ? 50 : d * 2 > 2000 ? 2000 : d * 2;
    lc->data_backoff_ms = d;
    lc->data_retry_at = rlk_now_ms() + d;
}

static void loop_data_down(void *arg, int err)
{
    rlk_loop_client *lc = arg;
    loop_data_back_off(lc, rlk_lconn_replied(lc->data));
    rlk_lconn_free(lc->data, err);
    lc->data = NULL;
    rlk_loop_sentinel_recheck(lc->sentinel); /* the master may have moved */
}

/* Dials the data connection, unless the back-off after failed dials is still running. */
static int loop_data_dial(rlk_loop_client *lc)
{
    char host[RLK_HOST_MAX];
    rlk_url u = loop_node_url(lc, host);
    int64_t left = lc->data_retry_at - rlk_now_ms();
    if (left > 0) {
        return rlk_err(RLOCK_ECONN, "Redis at %s:%d did not answer; the next dial is in %lld ms",
                       u.host != NULL   ? u.host
                       : u.path != NULL ? u.path
                                        : "?",
                       u.port, (long long)left);
    }
    /* No master known yet: the connection is parked until the Sentinels name one. */
    int r = u.host == NULL && u.path == NULL ? rlk_loop_sentinel_need(lc->sentinel) : RLOCK_OK;
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_lconn_cbs cbs = {.down = loop_data_down,
                         .arg = lc,
                         .connect_timeout_ms = lc->c->opts.connect_timeout_ms,
                         .command_timeout_ms = lc->c->opts.command_timeout_ms,
                         .tls = lc->c->tls};
    if (lc->data_dialled) {
        rlk_obs_count(lc->c, RLK_CNT_RECONNECTS);
    }
    lc->data_dialled = 1;
    r = rlk_lconn_new(&lc->loop, &u, &cbs, &lc->data);
    if (r == RLOCK_ECONN) { /* refused at once: it backs off as a dial that broke later */
        loop_data_back_off(lc, 0);
    }
    return r;
}

/* After a break the pub/sub connection is dialled again at the waiters' pace: here. */
static void loop_sub_kick(rlk_loop_client *lc)
{
    int wanted = 0;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        wanted |= ch->wanted;
    }
    if (wanted) {
        (void)loop_sub_ensure(lc);
    }
}

int rlk_loop_data(rlk_loop_client *lc, rlk_lconn **out)
{
    *out = NULL;
    if (lc->c->url.kind == RLK_URL_CLUSTER) {
        return rlk_err(RLOCK_EINVAL, "a cluster client has no single data connection");
    }
    int r = lc->data == NULL ? loop_data_dial(lc) : RLOCK_OK;
    if (r == RLOCK_OK) {
        loop_sub_kick(lc);
    }
    *out = lc->data;
    return r;
}

int rlk_loop_command(rlk_loop_client *lc, int slot, int argc, const char **argv, const size_t *lens,
                     rlk_lconn_reply_fn fn, void *arg)
{
    if (lc->c->url.kind == RLK_URL_CLUSTER) {
        if (lc->cluster == NULL) {
            (void)rlk_err(RLOCK_ECLOSED, "the client was freed");
            return RLOCK_ECLOSED;
        }
        loop_sub_kick(lc);
        return rlk_loop_cluster_command(lc->cluster, slot, argc, argv, lens, fn, arg);
    }
    rlk_lconn *conn = NULL;
    int r = rlk_loop_data(lc, &conn);
    return r ? r : rlk_lconn_command(conn, argc, argv, lens, fn, arg);
}

int rlk_loop_can_send_last(const rlk_loop_client *lc)
{
    return lc->c->url.kind == RLK_URL_CLUSTER ? rlk_loop_cluster_ok(lc->cluster)
                                              : rlk_lconn_ok(lc->data);
}

/* Sends request bytes of script (-1: none) on the data connection, or on a cluster on the
 * master of slot. */
static int loop_send_script(rlk_loop_client *lc, int slot, int script, const char *cmd, size_t len,
                            rlk_lconn_reply_fn fn, void *arg)
{
    if (lc->c->url.kind == RLK_URL_CLUSTER) {
        if (lc->cluster == NULL) {
            (void)rlk_err(RLOCK_ECLOSED, "the client was freed");
            return RLOCK_ECLOSED;
        }
        loop_sub_kick(lc);
        return rlk_loop_cluster_send_script(lc->cluster, slot, script, cmd, len, fn, arg);
    }
    rlk_lconn *conn = NULL;
    int r = rlk_loop_data(lc, &conn);
    return r ? r : rlk_lconn_send(conn, cmd, len, fn, arg);
}

/* An EVALSHA in flight, kept for its one resend after a NOSCRIPT reply (and, on a cluster,
 * those after a redirection). */
typedef struct loop_eval {
    rlk_loop_client *lc;
    int script;
    int resent;
    int slot;      /* its key's cluster slot (-1: none, or not a cluster) */
    int redirects; /* MOVED and ASK replies followed */
    rlk_lconn_reply_fn fn;
    void *arg;
    size_t len;
    char cmd[];
} loop_eval;

static void loop_eval_reply(void *arg, redisReply *rep, int err);

/* In sharded pub/sub the request runs the script's sharded variant: its SHA is written over the
 * one formatted, and a NOSCRIPT reload or an ASK loads that variant. Applied when sent and
 * again at the reply (a request queued before the mode was known: loop_cluster.c set the SHA
 * of the queued copy). */
static void loop_eval_mode(loop_eval *e)
{
    int id = rlk_script_for(e->lc->c, e->script);
    if (id != e->script) {
        (void)rlk_loop_request_set_sha(e->cmd, e->len, rlk_script_get(id)->sha1);
        e->script = id;
    }
}

/* A cluster's MOVED or ASK: resent where the reply says (at most 5 times: a slot that keeps
 * moving fails the request with RLOCK_ECONN). 1 when resent. */
static int loop_eval_redirect(loop_eval *e, redisReply **rep, int *err)
{
    rlk_loop_client *lc = e->lc;
    const redisReply *r0 = *rep;
    if (*err != RLOCK_OK || r0 == NULL || lc->cluster == NULL || r0->type != REDIS_REPLY_ERROR) {
        return 0;
    }
    rlk_redirect rd;
    if (e->redirects >= 5) {
        if (rlk_cluster_parse_redirect(r0->str, r0->len, &rd) != RLK_REDIRECT_NONE) {
            (void)rlk_err(RLOCK_ECONN, "script %s: slot %d keeps moving: %.*s",
                          rlk_script_get(e->script)->name, e->slot, (int)r0->len, r0->str);
            *err = RLOCK_ECONN;
            *rep = NULL;
        }
        return 0;
    }
    int r = rlk_loop_cluster_redirect(lc->cluster, r0, e->slot, e->script, e->cmd, e->len,
                                      loop_eval_reply, e);
    if (r == 1) {
        e->redirects++;
        return 1;
    }
    if (r < 0) {
        *err = r;
        *rep = NULL;
    }
    return 0;
}

static void loop_eval_reply(void *arg, redisReply *rep, int err)
{
    loop_eval *e = arg;
    loop_eval_mode(e);
    if (loop_eval_redirect(e, &rep, &err)) {
        return;
    }
    if (err == RLOCK_OK && rlk_reply_is_moved(rep)) {
        /* READONLY, LOADING, MASTERDOWN: the node is not (yet) the master and did not run the
         * script. The Sentinels are asked again; the request is not resent (their answer comes
         * later): it fails as the threaded client's second try does. */
        rlk_loop_sentinel_recheck(e->lc->sentinel);
        err = rlk_err(RLOCK_ECONN, "script %s: the master is changing: %.*s",
                      rlk_script_get(e->script)->name, (int)rep->len, rep->str);
        rep = NULL;
    }
    if (err == RLOCK_OK && !e->resent && rlk_reply_is_noscript(rep)) {
        const rlk_script_src *s = rlk_script_get(e->script);
        const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->body};
        size_t lens[3] = {6, 4, s->len};
        e->resent = 1;
        rlk_loop_client *lc = e->lc;
        int r = lc->data != NULL || lc->cluster != NULL
                    ? rlk_loop_command(lc, e->slot, 3, argv, lens, loop_ignore_reply, NULL)
                    : RLOCK_ECONN;
        r = r ? r : loop_send_script(lc, e->slot, e->script, e->cmd, e->len, loop_eval_reply, e);
        if (r == RLOCK_OK) {
            return;
        }
        err = r;
        rep = NULL;
    }
    e->fn(e->arg, rep, err);
    free(e);
}

int rlk_loop_eval(rlk_loop_client *lc, int script, const char *cmd, size_t len,
                  rlk_lconn_reply_fn fn, void *arg)
{
    int cluster = lc->c->url.kind == RLK_URL_CLUSTER;
    rlk_lconn *conn = NULL;
    int r = cluster ? RLOCK_OK : rlk_loop_data(lc, &conn);
    if (r != RLOCK_OK) {
        return r;
    }
    loop_eval *e = malloc(sizeof(*e) + len);
    if (e == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory sending a script");
    }
    *e = (loop_eval){.lc = lc, .script = script, .fn = fn, .arg = arg, .len = len};
    e->slot = cluster ? rlk_loop_request_slot(cmd, len) : -1;
    memcpy(e->cmd, cmd, len);
    loop_eval_mode(e);
    r = cluster ? loop_send_script(lc, e->slot, e->script, e->cmd, len, loop_eval_reply, e)
                : rlk_lconn_send(conn, cmd, len, loop_eval_reply, e);
    if (r != RLOCK_OK) {
        free(e);
    }
    return r;
}

/* The first map of a client in sharded pub/sub: a pub/sub connection parked while the mode was
 * not known yet goes, and every wanted channel is subscribed on its slot's master. */
static void loop_moved_sharded(rlk_loop_client *lc, int err)
{
    rlk_lconn *sub = lc->sub;
    lc->sub = NULL;
    rlk_lconn_free(sub, RLOCK_ECLOSED);
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        if (ch->shard == NULL) {
            ch->sent = ch->seen = ch->usent = ch->useen = 0;
        }
    }
    if (err == RLOCK_OK && rlk_loop_shards_ensure(lc) != RLOCK_OK) {
        rlk_loop_sub_retry(lc);
    }
}

void rlk_loop_moved(rlk_loop_client *lc, int err)
{
    char host[RLK_HOST_MAX];
    rlk_url u = loop_node_url(lc, host);
    rlk_lconn *data = lc->data, *sub = lc->sub;
    lc->data_backoff_ms = lc->data_retry_at = lc->sub_backoff_ms = 0;
    /* A new master's replicas are read behind the next synced script; a lower count than the
     * old master's counts only after RLK_REPLICA_SHRINK_MS (replica.h). */
    atomic_store(&lc->c->replicas.due, 0);
    rlk_loop_cb_enter(lc); /* a done may free the client */
    if (err == RLOCK_OK && rlk_lconn_parked(data)) {
        rlk_lconn_aim(data, u.host, u.port);
    } else if (data != NULL) {
        lc->data = NULL;
        rlk_lconn_free(data, err != RLOCK_OK ? err
                                             : rlk_err(RLOCK_ECONN, "the master moved to %s:%d",
                                                       u.host, u.port));
    }
    if (!lc->freed && lc->c->sharded) {
        loop_moved_sharded(lc, err);
    } else if (!lc->freed && sub != NULL && lc->sub == sub) {
        if (err == RLOCK_OK && rlk_lconn_parked(sub)) {
            rlk_lconn_aim(sub, u.host, u.port);
        } else { /* its waiters resubscribe on the new master and attempt once there */
            loop_sub_down(lc, err != RLOCK_OK ? err : RLOCK_ECONN);
        }
    }
    (void)rlk_loop_cb_leave(lc);
}

/* ---- pending operations and cancellation ----------------------------------------------- */

/* Runs on the cancel thread: one byte tells the loop to look at the tokens. */
static void loop_cancel_wake(void *arg)
{
    rlk_loop_client *lc = arg;
    ssize_t n = write(lc->pipe_w, "c", 1);
    (void)n; /* a full pipe holds a byte the loop has yet to read */
}

static void loop_on_pipe(void *arg, int events)
{
    rlk_loop_client *lc = arg;
    char buf[64];
    (void)events;
    while (read(lc->pipe_r, buf, sizeof(buf)) > 0) {
    }
    for (;;) {
        rlk_loop_op *op = lc->ops;
        while (op != NULL && (op->cancel_seen || !rlk_cancel_is_fired(op->cancel))) {
            op = op->next;
        }
        if (op == NULL) {
            return;
        }
        op->cancel_seen = 1;
        rlk_loop_cb_enter(lc);
        op->type->wake(op, RLK_LOOP_CANCEL);
        if (rlk_loop_cb_leave(lc)) {
            return;
        }
    }
}

int rlk_loop_op_add(rlk_loop_client *lc, rlk_loop_op *op, const rlock_cancel *cancel,
                    const rlk_loop_op_type *type)
{
    *op = (rlk_loop_op){.lc = lc, .cancel = cancel, .type = type};
    /* Only an operation with a token pays for its watch. */
    if (cancel != NULL && (op->watch = calloc(1, sizeof(*op->watch))) == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory watching a cancellation token");
    }
    int r = op->watch != NULL ? rlk_cancel_watch_begin(op->watch, cancel, loop_cancel_wake, lc)
                              : RLOCK_OK;
    if (r != RLOCK_OK) {
        free(op->watch);
        op->watch = NULL;
        return r;
    }
    op->next = lc->ops;
    if (lc->ops != NULL) {
        lc->ops->prev = op;
    }
    lc->ops = op;
    if (rlk_cancel_is_fired(cancel)) {
        loop_cancel_wake(lc); /* fired before the watch began: the loop still hears of it */
    }
    return RLOCK_OK;
}

void rlk_loop_op_remove(rlk_loop_op *op)
{
    rlk_loop_client *lc = op->lc;
    rlk_loop_leave(op);
    *(op->prev != NULL ? &op->prev->next : &lc->ops) = op->next;
    if (op->next != NULL) {
        op->next->prev = op->prev;
    }
    op->prev = op->next = NULL;
    if (op->watch != NULL) {
        rlk_cancel_watch_end(op->watch);
        free(op->watch);
        op->watch = NULL;
    }
}

/* ---- creation and free ----------------------------------------------------------------- */

/* Completes every pending operation with RLOCK_ECLOSED and frees the loop state. The
 * operations first queue their last requests (closing), written without waiting; then the
 * connections go: the requests in flight on them complete their operations. */
static void loop_client_stop(rlock_client *c)
{
    rlk_loop_client *lc = c->loop;
    rlk_lconn *data = lc->data, *sub = lc->sub;
    int last = 0;
    for (rlk_loop_op *op = lc->ops; op != NULL; op = op->next) {
        last |= op->type->closing != NULL && op->type->closing(op);
    }
    if (last) {
        rlk_lconn_flush(data); /* the leaves go out before the socket closes */
        rlk_loop_cluster_flush(lc->cluster);
    }
    rlk_loop_cluster *cluster = lc->cluster;
    lc->data = lc->sub = NULL;
    lc->cluster = NULL;
    rlk_loop_sentinel_free(lc->sentinel);
    lc->sentinel = NULL;
    rlk_loop_cluster_free(cluster, RLOCK_ECLOSED);
    rlk_lconn_free(data, rlk_err(RLOCK_ECLOSED, "the client was freed"));
    rlk_lconn_free(sub, RLOCK_ECLOSED);
    while (lc->ops != NULL) {
        rlk_loop_op *op = lc->ops;
        op->type->wake(op, RLK_LOOP_CLOSE);
        if (lc->ops == op) { /* a module that did not complete it: it still leaves */
            rlk_loop_op_remove(op);
        }
    }
    rlk_loop_shards_free(lc);
    while (lc->chans != NULL) {
        rlk_loop_chan *ch = lc->chans;
        lc->chans = ch->next;
        free(ch);
    }
    while (lc->holds != NULL) {
        rlk_loop_hold *h = lc->holds;
        lc->holds = h->next;
        if (!h->lost) { /* renewed no more; a lost one was counted when it was found */
            rlk_obs_forget(c, h->kind, h->label != NULL ? h->label : h->name);
        }
        free(h->name);
        free(h->label);
        free(h);
    }
    if (lc->wd_timer != NULL) {
        lc->loop.timer_free(lc->wd_timer);
    }
    rlk_loop_due_free_all(lc);
    lc->loop.timer_free(lc->sub_timer);
    lc->loop.io_free(lc->pipe_io);
    close(lc->pipe_r);
    close(lc->pipe_w);
    c->loop = NULL;
    lc->freed = 1;
    if (lc->depth == 0) {
        free(lc);
    }
}

static int loop_check(const rlock_loop *loop, const rlk_url *url)
{
    if (loop->io_new == NULL || loop->io_set == NULL || loop->io_free == NULL ||
        loop->timer_new == NULL || loop->timer_start == NULL || loop->timer_stop == NULL ||
        loop->timer_free == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_loop_client_new: every loop callback must be set");
    }
    int multi = (url->kind == RLK_URL_SENTINEL || url->kind == RLK_URL_CLUSTER) && url->nhosts > 0;
    if ((url->kind != RLK_URL_STANDALONE && !multi) ||
        (url->host == NULL && url->path == NULL && !multi)) {
        return rlk_err(RLOCK_EINVAL, "a loop client serves redis://, rediss://, unix://, "
                                     "redis-sentinel:// and redis-cluster:// only");
    }
    return RLOCK_OK;
}

/* The TLS context every connection of the client shares, when the URL (rediss://) or a TLS
 * option asks for TLS; the files are read now, so a wrong path fails at creation. */
static int loop_tls(rlock_client *c)
{
    const rlock_options *o = &c->opts;
    int wanted = c->url.tls || o->tls_ca_file != NULL || o->tls_cert_file != NULL ||
                 o->tls_key_file != NULL || o->tls_server_name != NULL;
    return wanted ? rlk_tls_new(o, &c->tls) : RLOCK_OK;
}

/* What loop_shard.c and loop_cluster.c call back (loop_client.h). */
static const rlk_loop_up loop_up = {
    .push = rlk_loop_push,
    .chan_send = rlk_loop_chan_send,
    .chan_drop_if_idle = rlk_loop_chan_drop_if_idle,
    .sub_retry = rlk_loop_sub_retry,
    .shards_check = rlk_loop_shards_check,
};

static int loop_client_start(rlock_client *c, const rlock_loop *loop)
{
    rlk_loop_client *lc = calloc(1, sizeof(*lc));
    int fds[2];
    if (lc == NULL || pipe(fds) != 0) {
        int code = lc == NULL ? RLOCK_ENOMEM : RLOCK_ECONN;
        free(lc);
        return rlk_err(code, "cannot make a loop client");
    }
    for (int i = 0; i < 2; i++) {
        (void)fcntl(fds[i], F_SETFL, O_NONBLOCK);
        (void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    lc->c = c;
    lc->up = &loop_up;
    lc->loop = *loop;
    lc->pipe_r = fds[0];
    lc->pipe_w = fds[1];
    lc->pipe_io = loop->io_new(loop->loop_data, fds[0], loop_on_pipe, lc);
    lc->sub_timer = loop->timer_new(loop->loop_data, loop_on_sub_timer, lc);
    if (lc->pipe_io == NULL || lc->sub_timer == NULL ||
        loop->io_set(lc->pipe_io, RLOCK_LOOP_READ) != 0) {
        if (lc->pipe_io != NULL) {
            loop->io_free(lc->pipe_io);
        }
        if (lc->sub_timer != NULL) {
            loop->timer_free(lc->sub_timer);
        }
        close(fds[0]);
        close(fds[1]);
        free(lc);
        return rlk_err(RLOCK_ENOMEM, "the loop could not watch the client's pipe");
    }
    c->loop = lc;
    c->loop_stop = loop_client_stop;
    c->loop_token = rlk_loop_token;
    if (c->url.kind == RLK_URL_SENTINEL) {
        int r = rlk_loop_sentinel_new(lc, rlk_loop_moved, &lc->sentinel);
        if (r != RLOCK_OK) {
            return r;
        }
    }
    if (c->url.kind == RLK_URL_CLUSTER) { /* the map is read on the loop from now on */
        return rlk_loop_cluster_new(lc, rlk_loop_moved, &lc->cluster);
    }
    rlk_lconn *conn = NULL;
    return rlk_loop_data(lc, &conn); /* dialling starts now, on the loop */
}

RLOCK_EXPORT int rlock_loop_client_new(const rlock_options *opts, const rlock_loop *loop,
                                       rlock_client **out)
{
    if (out == NULL || loop == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_loop_client_new: loop and out must not be NULL");
    }
    *out = NULL;
    rlock_client *c = NULL;
    int r = rlk_client_alloc(opts, &c);
    r = r ? r : loop_check(loop, &c->url);
    r = r ? r : loop_tls(c);
    r = r ? r : loop_client_start(c, loop);
    if (r != RLOCK_OK) {
        /* The free completes what it finds with its own message: the failure's is kept. */
        char saved[512];
        snprintf(saved, sizeof(saved), "%s", rlock_last_error());
        if (c != NULL && c->loop != NULL) {
            loop_client_stop(c);
        }
        if (c != NULL) {
            rlk_client_discard(c);
        }
        rlk_err_restore(saved);
        return r;
    }
    *out = c;
    return RLOCK_OK;
}
