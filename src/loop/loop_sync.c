/*
 * Replica-synced scripts on a loop client (loop_sync.h). The script's reply is copied and kept
 * until the WAIT behind it answers. When the count is not known yet (the first synced script, or
 * a NOSCRIPT resend that put the script behind its WAIT), INFO replication or the WAIT is sent
 * from the script's reply instead: WAIT counts every write made on the connection so far, so a
 * later one still proves the script reached the replicas. Static helpers are named lsy_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "loop_cluster.h"
#include "loop_route.h"
#include "loop_sync.h"
#include "replica.h"

typedef struct lsy_call {
    rlk_loop_client *lc;
    int slot; /* the script's key's cluster slot (-1: not a cluster) */
    rlk_sync s;
    redisReply *rep; /* the script's reply (a copy), NULL until it came or when it failed */
    int err;         /* the script's failure */
    int replied;     /* the script's reply came */
    int deferred;    /* the WAIT is to be sent once the script replied */
    rlk_lconn_reply_fn fn;
    void *arg;
} lsy_call;

/* The replica count of the node the script of slot goes to: the client's, or on a cluster its
 * master's (NULL while the map is not known). */
static rlk_replicas *lsy_replicas(rlk_loop_client *lc, int slot)
{
    return lc->cluster != NULL ? rlk_loop_cluster_replicas(lc->cluster, slot) : &lc->c->replicas;
}

/* The connection the script of slot went on, as it is (NULL: none). */
static rlk_lconn *lsy_conn(rlk_loop_client *lc, int slot)
{
    return lc->cluster != NULL ? rlk_loop_cluster_conn(lc->cluster, slot) : lc->data;
}

/* An INFO replication in flight: the node it reads is found again at its reply. */
typedef struct lsy_info {
    rlk_loop_client *lc;
    int slot;
} lsy_info;

static lsy_info *lsy_info_new(rlk_loop_client *lc, int slot)
{
    lsy_info *i = malloc(sizeof(*i));
    if (i != NULL) {
        *i = (lsy_info){.lc = lc, .slot = slot};
    }
    return i;
}

/* A copy of a reply that holds no array (NULL when out of memory). */
static redisReply *lsy_copy_leaf(const redisReply *r)
{
    redisReply *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    *c = *r;
    c->element = NULL;
    c->elements = 0;
    c->str = r->str != NULL ? malloc(r->len + 1) : NULL;
    if (r->str != NULL && c->str == NULL) {
        free(c);
        return NULL;
    }
    if (c->str != NULL) {
        memcpy(c->str, r->str, r->len + 1);
    }
    return c;
}

/* A copy of a script's reply, kept past the callback (the connection frees its own); freed
 * with freeReplyObject(). The scripts answer a value or a flat array of values: a nested array
 * is refused (NULL, as when out of memory). */
static redisReply *lsy_copy(const redisReply *r)
{
    redisReply *c = lsy_copy_leaf(r);
    size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    if (c == NULL || n == 0) {
        return c;
    }
    c->element = calloc(n, sizeof(redisReply *));
    int ok = c->element != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        ok = r->element[i]->type != REDIS_REPLY_ARRAY &&
             (c->element[i] = lsy_copy_leaf(r->element[i])) != NULL;
        c->elements = i + 1;
    }
    if (!ok) {
        freeReplyObject(c);
        return NULL;
    }
    return c;
}

/* Hands the script's outcome to its callback, with the sync's noted for rlk_sync_short(). */
static void lsy_deliver(lsy_call *k)
{
    rlk_sync_note(&k->s);
    k->fn(k->arg, k->err == RLOCK_OK ? k->rep : NULL, k->err);
    rlk_sync_clear();
    freeReplyObject(k->rep);
    free(k);
}

static void lsy_info_reply(void *arg, redisReply *rep, int err)
{
    lsy_info *i = arg;
    rlk_loop_client *lc = i->lc;
    rlk_replicas *st = err == RLOCK_OK ? lsy_replicas(lc, i->slot) : NULL;
    free(i);
    if (st != NULL && rep->type == REDIS_REPLY_STRING) {
        rlk_replica_learn_info(st, rep->str);
    } else if (st != NULL) {
        /* As rlk_replica_init() does for a user without INFO: said once, grants go unsynced. */
        rlk_replica_learn_info(st, "");
        atomic_store(&lc->c->replicas_unknown, 1);
        rlk_log(lc->c, RLOCK_LOG_WARN,
                "replica_sync: INFO replication refused (%s); grants are not replica-synced",
                rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    }
}

static void lsy_refresh_reply(void *arg, redisReply *rep, int err)
{
    lsy_info *i = arg;
    rlk_replicas *st = err == RLOCK_OK ? lsy_replicas(i->lc, i->slot) : NULL;
    free(i);
    if (st != NULL && st->known == 1) {
        rlk_sync s = {.node = st};
        rlk_sync_took(&s, NULL, rep);
    }
}

/* Queues INFO replication (a refresh) behind what was sent on conn. */
static void lsy_send_refresh(rlk_loop_client *lc, rlk_lconn *conn, int slot)
{
    const char *info[2] = {"INFO", "replication"};
    lsy_info *i = conn != NULL ? lsy_info_new(lc, slot) : NULL;
    if (i != NULL && rlk_lconn_command(conn, 2, info, NULL, lsy_refresh_reply, i) != RLOCK_OK) {
        free(i);
    }
}

static void lsy_wait_reply(void *arg, redisReply *rep, int err)
{
    lsy_call *k = arg;
    if (!k->replied) {
        k->deferred = 1; /* a NOSCRIPT resend: this WAIT ran before the script */
        return;
    }
    rlk_sync_took(&k->s, err == RLOCK_OK ? rep : NULL, NULL);
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        k->s.acked = -1; /* no acknowledgement known */
    }
    lsy_deliver(k);
}

/* Queues WAIT (and INFO replication when a refresh is due) behind what was sent on the data
 * connection; RLOCK_OK or the connection's error. */
static int lsy_send_wait(lsy_call *k)
{
    rlk_loop_client *lc = k->lc;
    rlk_lconn *conn = lsy_conn(lc, k->slot);
    char n[24], timeout[24];
    rlk_fmt_i64(n, k->s.n);
    rlk_fmt_i64(timeout, lc->c->opts.replica_sync_timeout_ms);
    const char *wait[3] = {"WAIT", n, timeout};
    const char *waitaof[4] = {"WAITAOF", "1", n, timeout};
    int aof = lc->c->opts.replica_sync_aof;
    int r = conn == NULL ? RLOCK_ECONN
            : aof        ? rlk_lconn_command(conn, 4, waitaof, NULL, lsy_wait_reply, k)
                         : rlk_lconn_command(conn, 3, wait, NULL, lsy_wait_reply, k);
    if (r == RLOCK_OK && k->s.refresh) {
        lsy_send_refresh(lc, conn, k->slot);
    }
    return r;
}

/* 1 for an array reply holding an array, which lsy_copy() refuses. */
static int lsy_nested(const redisReply *rep)
{
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        if (rep->element[i]->type == REDIS_REPLY_ARRAY) {
            return 1;
        }
    }
    return 0;
}

static void lsy_script_reply(void *arg, redisReply *rep, int err)
{
    lsy_call *k = arg;
    k->replied = 1;
    k->err = err;
    if (err == RLOCK_OK && (k->rep = lsy_copy(rep)) == NULL) {
        k->err = rlk_err(lsy_nested(rep) ? RLOCK_EPROTO : RLOCK_ENOMEM,
                         "cannot keep a script's reply until its WAIT answered");
    }
    if (!k->deferred) {
        return; /* the WAIT behind it answers next, and delivers */
    }
    if (k->err != RLOCK_OK) {
        lsy_deliver(k);
        return;
    }
    rlk_replicas *st = lsy_replicas(k->lc, k->slot);
    if (st == NULL) { /* no map yet: cannot be, the script was sent after one was read */
        k->s.n = 0;
        lsy_deliver(k);
        return;
    }
    rlk_sync_plan_known(k->lc->c, st, &k->s);
    int aof = k->lc->c->opts.replica_sync_aof && k->s.node != NULL;
    if ((k->s.n <= 0 && !aof) || lsy_send_wait(k) != RLOCK_OK) {
        k->s.acked = k->s.n > 0 || aof ? -1 : k->s.n;
        lsy_deliver(k);
    }
}

/* A script that waits for no replica: sent as it is, with the refresh behind it when due. */
static int lsy_plain(rlk_loop_client *lc, const rlk_sync *s, int script, const char *cmd,
                     size_t len, rlk_lconn_reply_fn fn, void *arg)
{
    int r = rlk_loop_eval(lc, script, cmd, len, fn, arg);
    int slot = lc->cluster != NULL ? rlk_loop_request_slot(cmd, len) : -1;
    if (r == RLOCK_OK && s->refresh) {
        lsy_send_refresh(lc, lsy_conn(lc, slot), slot);
    }
    return r;
}

int rlk_loop_synced(rlk_loop_client *lc, int slot)
{
    rlock_client *c = lc->c;
    rlk_replicas *st = c->opts.replica_sync ? lsy_replicas(lc, slot) : NULL;
    if (st == NULL) {
        return c->opts.replica_sync;
    }
    rlk_sync s = {0};
    rlk_sync_plan_known(c, st, &s);
    int first = s.node != NULL && atomic_load(&st->known) != 1;
    return first || s.n > 0 || (s.node != NULL && c->opts.replica_sync_aof);
}

int rlk_loop_eval_synced(rlk_loop_client *lc, int script, const char *cmd, size_t len,
                         rlk_lconn_reply_fn fn, void *arg)
{
    rlock_client *c = lc->c;
    int sync = c->opts.replica_sync, aof = c->opts.replica_sync_aof;
    int slot = lc->cluster != NULL ? rlk_loop_request_slot(cmd, len) : -1;
    rlk_replicas *st = lsy_replicas(lc, slot);
    rlk_sync s = {0};
    int first = sync; /* the first synced script on its node, or before a cluster's map */
    if (st != NULL) {
        rlk_sync_plan_known(c, st, &s);
        first = s.node != NULL && atomic_load(&st->known) != 1;
    }
    if (!first && s.n <= 0 && (s.node == NULL || !aof)) {
        return lsy_plain(lc, &s, script, cmd, len, fn, arg);
    }
    lsy_call *k = calloc(1, sizeof(*k));
    if (k == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory sending a synced script");
    }
    *k = (lsy_call){.lc = lc, .slot = slot, .s = s, .fn = fn, .arg = arg, .deferred = first};
    int r = RLOCK_OK;
    if (first) {
        /* The count is read ahead of the script, its WAIT follows its reply. */
        const char *info[2] = {"INFO", "replication"};
        lsy_info *i = lsy_info_new(lc, slot);
        r = i != NULL ? rlk_loop_command(lc, slot, 2, info, NULL, lsy_info_reply, i)
                      : rlk_err(RLOCK_ENOMEM, "out of memory sending a synced script");
        if (r != RLOCK_OK) {
            free(i);
        }
    }
    r = r ? r : rlk_loop_eval(lc, script, cmd, len, lsy_script_reply, k);
    if (r == RLOCK_OK && !first && lsy_send_wait(k) != RLOCK_OK) {
        k->deferred = 1; /* the script's reply (a failure, on a broken connection) delivers */
    }
    if (r != RLOCK_OK) {
        free(k);
    }
    return r;
}
