/*
 * Sharded pub/sub on a loop cluster client (loop_shard.h): the masters' pub/sub connections
 * (records kept until the free), SSUBSCRIBE on each channel's slot owner, and the moves of a
 * channel with its slot. The channel records and their counts are loop_client.c's. Static
 * helpers are named lsh_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "loop_cluster.h"
#include "loop_shard.h"

/* A master's pub/sub connection in sharded pub/sub (kept until the free: a channel points at
 * one while it is subscribed there). */
struct rlk_loop_shard {
    rlk_loop_shard *next;
    rlk_loop_client *lc;
    rlk_lconn *conn; /* NULL until needed, and after a break until needed again */
    int port;
    char host[RLK_HOST_MAX];
};

/* Forgets ch's subscription on its shard (the connection broke, the slot moved): the counts
 * start again with the next SSUBSCRIBE, wherever it goes. */
static void lsh_detach(rlk_loop_chan *ch)
{
    ch->shard = NULL;
    ch->sent = ch->seen = ch->usent = ch->useen = 0;
}

static void lsh_down(void *arg, int err)
{
    rlk_loop_shard *sh = arg;
    rlk_loop_client *lc = sh->lc;
    rlk_lconn_free(sh->conn, err);
    sh->conn = NULL;
    int wanted = 0;
    rlk_loop_chan *next = NULL;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = next) {
        next = ch->next;
        if (ch->shard == sh) {
            lsh_detach(ch);
            wanted |= ch->wanted;
            lc->up->chan_drop_if_idle(lc, ch);
        }
    }
    if (wanted) { /* resubscribed by the redial timer, on the master the map names then */
        rlk_loop_cluster_refresh(lc->cluster);
        lc->up->sub_retry(lc);
    }
}

/* A pushed error on a shard's connection: a redirected SSUBSCRIBE. Its slot's channels there
 * are subscribed again on the owner a MOVED names (rlk_loop_shards_check()) or, after an ASK,
 * by the redial timer once the map is read again. */
static void lsh_redirected(rlk_loop_shard *sh, const redisReply *rep)
{
    rlk_loop_client *lc = sh->lc;
    int slot = rlk_loop_cluster_redirected(lc->cluster, rep);
    if (slot < 0) { /* another refusal: dialled again after a back-off */
        lsh_down(sh, rlk_err(RLOCK_EPROTO, "sharded pub/sub refused: %s", rep->str));
        return;
    }
    int left = 0;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL; ch = ch->next) {
        if (ch->shard == sh && ch->slot == slot && ch->wanted && ch->seen < ch->sent) {
            lsh_detach(ch);
            left = 1;
        }
    }
    if (left) { /* still named by the map (an ASK): not again at once, but after a back-off */
        lc->up->sub_retry(lc);
    }
}

static void lsh_on_push(void *arg, redisReply *rep)
{
    rlk_loop_shard *sh = arg;
    if (rep->type == REDIS_REPLY_ERROR) {
        lsh_redirected(sh, rep);
        return;
    }
    sh->lc->up->push(sh->lc, sh, rep);
}

/* The record of the master at host:port, made when new (NULL: no memory). */
static rlk_loop_shard *lsh_at(rlk_loop_client *lc, const char *host, int port)
{
    for (rlk_loop_shard *sh = lc->shards; sh != NULL; sh = sh->next) {
        if (sh->port == port && strcmp(sh->host, host) == 0) {
            return sh;
        }
    }
    rlk_loop_shard *sh = calloc(1, sizeof(*sh));
    if (sh != NULL) {
        sh->lc = lc;
        sh->port = port;
        snprintf(sh->host, sizeof(sh->host), "%s", host);
        sh->next = lc->shards;
        lc->shards = sh;
    }
    return sh;
}

static int lsh_conn(rlk_loop_shard *sh)
{
    rlk_loop_client *lc = sh->lc;
    if (sh->conn != NULL) {
        return RLOCK_OK;
    }
    rlk_url u = lc->c->url; /* the client's credentials and TLS, aimed at the master */
    u.kind = RLK_URL_STANDALONE;
    u.host = sh->host;
    u.port = sh->port;
    u.path = NULL;
    rlk_lconn_cbs cbs = {.push = lsh_on_push,
                         .down = lsh_down,
                         .arg = sh,
                         .connect_timeout_ms = lc->c->opts.connect_timeout_ms,
                         .command_timeout_ms = lc->c->opts.command_timeout_ms,
                         .tls = lc->c->tls};
    return rlk_lconn_new(&lc->loop, &u, &cbs, &sh->conn);
}

int rlk_loop_shard_subscribe(rlk_loop_client *lc, rlk_loop_chan *ch)
{
    char host[RLK_HOST_MAX];
    int port = 0;
    if (lc->cluster == NULL || rlk_loop_cluster_owner(lc->cluster, ch->slot, host, &port) != 0) {
        return RLOCK_OK;
    }
    rlk_loop_shard *sh = lsh_at(lc, host, port);
    int r =
        sh != NULL ? lsh_conn(sh) : rlk_err(RLOCK_ENOMEM, "out of memory subscribing %s", ch->name);
    if (r != RLOCK_OK) {
        return r;
    }
    lsh_detach(ch);
    ch->shard = sh;
    return lc->up->chan_send(lc, ch, 1);
}

int rlk_loop_shards_ensure(rlk_loop_client *lc)
{
    int r = RLOCK_OK;
    for (rlk_loop_chan *ch = lc->chans; ch != NULL && r == RLOCK_OK; ch = ch->next) {
        r = ch->wanted && ch->shard == NULL ? rlk_loop_shard_subscribe(lc, ch) : RLOCK_OK;
    }
    return r;
}

void rlk_loop_shard_dropped(rlk_loop_client *lc, rlk_loop_chan *ch)
{
    lsh_detach(ch);
    if (!ch->wanted) {
        lc->up->chan_drop_if_idle(lc, ch);
        return;
    }
    rlk_loop_cluster_refresh(lc->cluster);
    if (rlk_loop_shard_subscribe(lc, ch) != RLOCK_OK) {
        lc->up->sub_retry(lc);
    }
}

void rlk_loop_shards_check(rlk_loop_client *lc)
{
    rlk_loop_chan *next = NULL;
    for (rlk_loop_chan *ch = lc->c->sharded ? lc->chans : NULL; ch != NULL; ch = next) {
        next = ch->next;
        char host[RLK_HOST_MAX];
        int port = 0;
        rlk_loop_shard *sh = ch->shard;
        if (sh == NULL || rlk_loop_cluster_owner(lc->cluster, ch->slot, host, &port) != 0 ||
            (sh->port == port && strcmp(sh->host, host) == 0)) {
            continue;
        }
        lsh_detach(ch); /* its waiters attempt once after the new confirmation */
        if (!ch->wanted) {
            lc->up->chan_drop_if_idle(lc, ch);
        } else if (rlk_loop_shard_subscribe(lc, ch) != RLOCK_OK) {
            lc->up->sub_retry(lc);
        }
    }
}

rlk_lconn *rlk_loop_shard_conn(const rlk_loop_shard *sh)
{
    return sh != NULL ? sh->conn : NULL;
}

void rlk_loop_shards_free(rlk_loop_client *lc)
{
    while (lc->shards != NULL) {
        rlk_loop_shard *sh = lc->shards;
        lc->shards = sh->next;
        rlk_lconn_free(sh->conn, RLOCK_ECLOSED);
        free(sh);
    }
}
