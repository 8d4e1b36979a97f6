/*
 * The script registry. Scripts are compiled in byte for byte with their SHA1 and always run by
 * EVALSHA. Redis forgets scripts on SCRIPT FLUSH, a restart or a failover; the NOSCRIPT reply
 * then makes us SCRIPT LOAD the exact bytes (checking that Redis computed the same SHA1) and
 * resend once, so callers never see it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_slot.h"
#include "error.h"
#include "replica.h"
#include "resp_format.h"
#include "scripts.h"
#include "sentinel.h"

const rlk_script_src *rlk_script_get(int id)
{
    int base = id & ~RLK_SCRIPT_SHARDED;
    if (id < 0 || base >= RLK_SCRIPT__COUNT) {
        return NULL;
    }
    return (id & RLK_SCRIPT_SHARDED) ? &rlk_script_table_sharded[base] : &rlk_script_table[base];
}

int rlk_script_for(const rlock_client *c, int script)
{
    return c->sharded ? script | RLK_SCRIPT_SHARDED : script;
}

int rlk_reply_is_noscript(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           strncmp(r->str, "NOSCRIPT", 8) == 0;
}

static int error_starts(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= n &&
           strncmp(r->str, prefix, n) == 0;
}

int rlk_reply_is_moved(const redisReply *r)
{
    return error_starts(r, "READONLY") || error_starts(r, "LOADING") ||
           error_starts(r, "MASTERDOWN");
}

int rlk_script_load(rlk_conn *conn, int script)
{
    const rlk_script_src *s = rlk_script_get(script);
    if (s == NULL) {
        return rlk_err(RLOCK_EINVAL, "unknown script id %d", script);
    }
    const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->body};
    size_t lens[3] = {6, 4, s->len};
    redisReply *r = NULL;
    int rc = rlk_conn_command(conn, 3, argv, lens, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = rlk_err(RLOCK_EREDIS, "SCRIPT LOAD %s failed: %s", s->name, r->str);
    } else if (r->type != REDIS_REPLY_STRING || r->len != 40 || memcmp(r->str, s->sha1, 40) != 0) {
        rc = rlk_err(RLOCK_EPROTO, "SCRIPT LOAD %s: Redis computed a different SHA1", s->name);
    }
    freeReplyObject(r);
    return rc;
}

/* EVALSHA needs at most 3 + 2 * RLK_ARGS_MAX arguments for rlk_args-based calls. */
#define RLK_EVAL_MAX (3 + 2 * RLK_ARGS_MAX)

static int eval_argv(int script, const rlk_args *keys, const rlk_args *args, char *nkeys,
                     const char **argv, size_t *lens)
{
    const rlk_script_src *s = rlk_script_get(script);
    if (s == NULL) {
        return rlk_err(RLOCK_EINVAL, "unknown script id %d", script);
    }
    int n = 0;
    argv[n] = "EVALSHA";
    lens[n++] = 7;
    argv[n] = s->sha1;
    lens[n++] = 40;
    size_t kn = rlk_fmt_i64(nkeys, keys ? keys->n : 0);
    argv[n] = nkeys;
    lens[n++] = kn;
    for (int i = 0; keys && i < keys->n; i++, n++) {
        argv[n] = keys->v[i];
        lens[n] = keys->len[i];
    }
    for (int i = 0; args && i < args->n; i++, n++) {
        argv[n] = args->v[i];
        lens[n] = args->len[i];
    }
    return n;
}

/* The scripts whose writes must reach the replicas before the caller relies on them: lock
 * grants, re-entries and releases, semaphore acquires and releases, latch count-downs (renewals
 * are synced by the watchdog's pipeline). */
static int script_synced(int script)
{
    switch (script & ~RLK_SCRIPT_SHARDED) {
    case RLK_SCRIPT_LOCK_ACQUIRE:
    case RLK_SCRIPT_LOCK_RELEASE:
    case RLK_SCRIPT_FAIR_ACQUIRE:
    case RLK_SCRIPT_FAIR_RELEASE:
    case RLK_SCRIPT_RW_READ_ACQUIRE:
    case RLK_SCRIPT_RW_READ_RELEASE:
    case RLK_SCRIPT_RW_WRITE_ACQUIRE:
    case RLK_SCRIPT_RW_WRITE_RELEASE:
    case RLK_SCRIPT_SEM_ACQUIRE:
    case RLK_SCRIPT_SEM_RELEASE:
    case RLK_SCRIPT_SEM_RELEASE_LEASED:
    case RLK_SCRIPT_LATCH_COUNT_DOWN:
        return 1;
    default:
        return 0;
    }
}

/* One EVALSHA call for rlk_pool_run(): the request, the script it runs and, for a synced
 * script, the client whose replicas it waits for (NULL otherwise). */
typedef struct rlk_eval {
    int script;
    int argc;
    const char **argv;
    const size_t *lens;
    rlock_client *sync_client;
    rlk_sync sync;
    int slot; /* the slot of the first key (a cluster client routes by it), -1 for none */
} rlk_eval;

/* Sends EVALSHA, followed on the same connection by the replica sync when the script is synced,
 * and reads the script's reply first. */
static int eval_once(rlk_conn *conn, rlk_eval *e, redisReply **out)
{
    if (e->sync_client == NULL) {
        return rlk_conn_command(conn, e->argc, e->argv, e->lens, out);
    }
    int r = rlk_sync_plan(e->sync_client, conn, &e->sync);
    r = r ? r : rlk_conn_append(conn, e->argc, e->argv, e->lens);
    r = r ? r : rlk_sync_append(e->sync_client, conn, &e->sync);
    r = r ? r : rlk_conn_read(conn, out);
    r = r ? r : rlk_sync_read(e->sync_client, conn, &e->sync);
    if (r != RLOCK_OK && *out != NULL) {
        /* The connection broke after the script's reply: its outcome is unknown to the caller. */
        freeReplyObject(*out);
        *out = NULL;
    }
    return r;
}

/* Sends EVALSHA; a NOSCRIPT reply loads the script on the same connection and resends once. A
 * failed load that left the connection usable fails the call with the load's own code (EREDIS,
 * or EPROTO for a SHA1 mismatch), which matches the detail it recorded. */
static int exchange_eval(rlk_conn *conn, void *arg, redisReply **out)
{
    rlk_eval *e = arg;
    int r = eval_once(conn, e, out);
    if (r == RLOCK_OK && rlk_reply_is_noscript(*out)) {
        freeReplyObject(*out);
        *out = NULL;
        r = rlk_script_load(conn, e->script);
        r = r ? r : eval_once(conn, e, out);
    }
    return r;
}

/* rlk_pool_run() of an EVALSHA that follows the master of a Sentinel deployment: a node that
 * says it is not the master did not run the script, so it is resent once after the Sentinels
 * were asked again. */
static int script_run(rlock_client *c, int flags, rlk_eval *e, redisReply **out)
{
    int rc = rlk_pool_run_slot(c, e->slot, flags, exchange_eval, e, out);
    for (int attempt = 0; rc == RLOCK_OK && rlk_reply_is_moved(*out); attempt++) {
        char why[128];
        snprintf(why, sizeof(why), "%.*s", (int)(*out)->len, (*out)->str);
        freeReplyObject(*out);
        *out = NULL;
        rlk_sentinel_recheck(c);
        if (attempt > 0) {
            return rlk_err(RLOCK_ECONN, "script %s: the master is changing: %s",
                           rlk_script_get(e->script)->name, why);
        }
        rc = rlk_pool_run_slot(c, e->slot, flags, exchange_eval, e, out);
    }
    if (rc == RLOCK_ECONN) {
        rlk_sentinel_recheck(c);
    }
    return rc;
}

int rlk_script(rlock_client *c, int script, int flags, const rlk_args *keys, const rlk_args *args,
               redisReply **out)
{
    const char *argv[RLK_EVAL_MAX];
    size_t lens[RLK_EVAL_MAX];
    char nkeys[24];
    *out = NULL;
    script = rlk_script_for(c, script);
    int n = eval_argv(script, keys, args, nkeys, argv, lens);
    if (n < 0) {
        return n;
    }
    /* The slot is computed only for a cluster client: a standalone call pays nothing. */
    int slot = c->cluster != NULL && keys != NULL && keys->n > 0
                   ? rlk_cluster_key_slot(keys->v[0], keys->len[0])
                   : -1;
    int synced = script_synced(script) || (flags & RLK_SYNCED);
    rlk_eval e = {script, n, argv, lens, synced ? c : NULL, {0}, slot};
    redisReply *r = NULL;
    int rc = script_run(c, flags, &e, &r);
    if (e.sync_client != NULL) {
        rlk_sync_note(rc == RLOCK_OK ? &e.sync : &(rlk_sync){0});
    }
    if (rc != RLOCK_OK || r == NULL) {
        return rc != RLOCK_OK
                   ? rc
                   : rlk_err(RLOCK_EPROTO, "script %s: no reply", rlk_script_get(script)->name);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = rlk_err(RLOCK_EREDIS, "script %s: %s", rlk_script_get(script)->name, r->str);
        freeReplyObject(r);
        return rc;
    }
    *out = r;
    return RLOCK_OK;
}

int rlk_script_append(rlk_conn *conn, int script, const rlk_args *keys, const rlk_args *args)
{
    const char *argv[RLK_EVAL_MAX];
    size_t lens[RLK_EVAL_MAX];
    char nkeys[24];
    int n = eval_argv(script, keys, args, nkeys, argv, lens);
    if (n < 0) {
        return n;
    }
    return rlk_conn_append(conn, n, argv, lens);
}

int rlk_script_format(int script, const rlk_args *keys, const rlk_args *args, char **cmd,
                      size_t *len)
{
    const char *argv[RLK_EVAL_MAX];
    size_t lens[RLK_EVAL_MAX];
    char nkeys[24];
    *cmd = NULL;
    int n = eval_argv(script, keys, args, nkeys, argv, lens);
    if (n < 0) {
        return n;
    }
    long long fl = rlk_resp_format(n, argv, lens, cmd);
    if (fl < 0) {
        *cmd = NULL;
        return rlk_err(RLOCK_ENOMEM, "cannot format a script call");
    }
    *len = (size_t)fl;
    return RLOCK_OK;
}

int rlk_script_appendv(rlk_conn *conn, int script, int nkeys, int argc, const char **argv,
                       const size_t *lens)
{
    const rlk_script_src *s = rlk_script_get(script);
    if (s == NULL) {
        return rlk_err(RLOCK_EINVAL, "unknown script id %d", script);
    }
    const char **v = malloc(sizeof(*v) * (size_t)(argc + 3));
    size_t *l = malloc(sizeof(*l) * (size_t)(argc + 3));
    if (v == NULL || l == NULL) {
        free(v);
        free(l);
        return rlk_err(RLOCK_ENOMEM, "cannot build a batch of %d arguments", argc);
    }
    char nk[24];
    size_t kn = rlk_fmt_i64(nk, nkeys);
    v[0] = "EVALSHA";
    l[0] = 7;
    v[1] = s->sha1;
    l[1] = 40;
    v[2] = nk;
    l[2] = kn;
    memcpy(v + 3, argv, sizeof(*v) * (size_t)argc);
    memcpy(l + 3, lens, sizeof(*l) * (size_t)argc);
    int rc = rlk_conn_append(conn, argc + 3, v, l);
    free(v);
    free(l);
    return rc;
}
