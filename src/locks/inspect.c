/*
 * rlock_inspect(): a read-only snapshot of one lock's keys (lua/inspect.lua), decoded into a
 * public rlock_lock_info. It opens no handle and writes nothing, so an operator may look at any
 * lock, including one held by a Java service through Redisson, without disturbing it.
 */
#include <stdlib.h>
#include <string.h>

#include "client_fork.h"
#include "error.h"
#include "pool.h"
#include "client.h"
#include "inspect_decode.h"
#include "scripts.h"

/* Redisson's derived key names of the lock, in the order lua/inspect.lua takes them. */
#define RLK_INSPECT_KEYS 6
static const char *const inspect_prefix[RLK_INSPECT_KEYS] = {NULL,
                                                             "redisson_lock_queue",
                                                             "redisson_lock_timeout",
                                                             "redisson_lock_token",
                                                             "rlock_rwlock_writers",
                                                             "rlock_lock_waiters"};

static int int_at(const redisReply *r, size_t i, long long *v)
{
    if (r->element[i]->type != REDIS_REPLY_INTEGER) {
        return rlk_err(RLOCK_EPROTO, "inspect: element %zu is not an integer", i);
    }
    *v = r->element[i]->integer;
    return RLOCK_OK;
}

static char *inspect_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Decodes a flat {owner, deadline, ...} array into waiters. */
static int decode_waiters(const redisReply *r, rlock_lock_waiter **out, size_t *n)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
        return rlk_err(RLOCK_EPROTO, "inspect: malformed waiter list");
    }
    *n = 0;
    if (r->elements == 0) {
        return RLOCK_OK;
    }
    *out = calloc(r->elements / 2, sizeof(**out));
    if (*out == NULL) {
        return rlk_err(RLOCK_ENOMEM, "inspect: no memory for %zu waiters", r->elements / 2);
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *o = r->element[i];
        const redisReply *d = r->element[i + 1];
        if (o->type != REDIS_REPLY_STRING || d->type != REDIS_REPLY_INTEGER) {
            return rlk_err(RLOCK_EPROTO, "inspect: malformed waiter entry");
        }
        rlock_lock_waiter *w = &(*out)[(*n)++];
        w->deadline_ms = d->integer;
        w->owner = inspect_strndup(o->str, o->len);
        if (w->owner == NULL) {
            return rlk_err(RLOCK_ENOMEM, "inspect: no memory for a waiter");
        }
    }
    return RLOCK_OK;
}

/* Decodes HGETALL's flat array: "mode" becomes info->mode, every other field a holder. */
static int decode_fields(const redisReply *r, rlock_lock_info *info)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
        return rlk_err(RLOCK_EPROTO, "inspect: malformed lock hash");
    }
    if (r->elements > 0) {
        info->holders = calloc(r->elements / 2, sizeof(*info->holders));
        if (info->holders == NULL) {
            return rlk_err(RLOCK_ENOMEM, "inspect: no memory for the holders");
        }
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i];
        const redisReply *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            return rlk_err(RLOCK_EPROTO, "inspect: malformed lock hash entry");
        }
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            /* Static strings, so the info needs no copy of Redis' text. */
            info->mode = strcmp(v->str, "write") == 0 ? "write" : "read";
            continue;
        }
        rlock_lock_holder *h = &info->holders[info->n_holders++];
        h->count = strtoll(v->str, NULL, 10);
        h->owner = inspect_strndup(f->str, f->len);
        if (h->owner == NULL) {
            return rlk_err(RLOCK_ENOMEM, "inspect: no memory for a holder");
        }
    }
    return RLOCK_OK;
}

/* What the keys say the lock is. A fair lock without waiters keeps no queue, so it reads as a
 * reentrant lock: both store the same hash. */
static void judge_type(rlock_lock_info *info, int hash_exists)
{
    /* A "mode" field, or waiting writers with no other lock data, is a read-write lock. */
    int rw = info->mode != NULL || (info->n_queue == 0 && !hash_exists && info->n_writers > 0);
    if (rw) {
        info->type = RLOCK_TYPE_RW;
    } else if (info->n_queue > 0) {
        info->type = RLOCK_TYPE_FAIR;
    } else if (hash_exists || info->n_waiters > 0) {
        info->type = RLOCK_TYPE_REENTRANT;
    } else {
        info->type = RLOCK_TYPE_FREE;
    }
    info->locked = hash_exists && info->n_holders > 0;
}

static int inspect_parse(const redisReply *r, rlock_lock_info *info)
{
    long long v = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || int_at(r, 0, &v) != RLOCK_OK) {
        return rlk_err(RLOCK_EPROTO, "inspect: unexpected reply shape");
    }
    if (v == 0) {
        const redisReply *t = r->element[1];
        return rlk_err(RLOCK_EINVAL, "key '%s' holds a Redis %s, not a lock", info->name,
                       t->type == REDIS_REPLY_STRING ? t->str : "value");
    }
    if (r->elements != 8) {
        return rlk_err(RLOCK_EPROTO, "inspect: unexpected reply shape");
    }
    long long token = 0;
    int rc = int_at(r, 1, &v);
    info->server_time_ms = v;
    rc = rc ? rc : int_at(r, 2, &v);
    info->ttl_ms = v;
    rc = rc ? rc : int_at(r, 3, &token);
    info->token = token > 0 ? (uint64_t)token : 0;
    rc = rc ? rc : decode_fields(r->element[4], info);
    rc = rc ? rc : decode_waiters(r->element[5], &info->queue, &info->n_queue);
    rc = rc ? rc : decode_waiters(r->element[6], &info->writers, &info->n_writers);
    rc = rc ? rc : decode_waiters(r->element[7], &info->waiters, &info->n_waiters);
    if (rc == RLOCK_OK) {
        judge_type(info, info->ttl_ms != -2);
    }
    return rc;
}

int rlk_inspect_check_reply(const redisReply *r, rlock_lock_info *info)
{
    return inspect_parse(r, info);
}

static int inspect_run(rlock_client *c, rlock_lock_info *info, redisReply **rep)
{
    size_t len = strlen(info->name);
    rlk_buf names[RLK_INSPECT_KEYS];
    rlk_args keys, args;
    int rc = RLOCK_OK;
    rlk_args_init(&keys);
    rlk_args_init(&args);
    rlk_args_add(&keys, info->name, len);
    for (int i = 1; i < RLK_INSPECT_KEYS; i++) {
        rlk_buf_init(&names[i]);
        rc = rc ? rc : rlk_prefix_name(&names[i], inspect_prefix[i], info->name, len);
        rlk_args_add(&keys, names[i].p, names[i].len);
    }
    rc = rc ? rc : rlk_script(c, RLK_SCRIPT_INSPECT, RLK_IDEMPOTENT, &keys, &args, rep);
    for (int i = 1; i < RLK_INSPECT_KEYS; i++) {
        rlk_buf_free(&names[i]);
    }
    return rc;
}

RLOCK_EXPORT int rlock_inspect(rlock_client *client, const char *name, rlock_lock_info **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (client == NULL || out == NULL || name == NULL || name[0] == '\0') {
        return rlk_err(RLOCK_EINVAL, "rlock_inspect: client, out and a non-empty name are "
                                     "required");
    }
    int rc = rlk_client_enter(client);
    rc = rc ? rc : rlk_check_cluster_name(client, name, "lock");
    if (rc != RLOCK_OK) {
        return rc;
    }
    rlock_lock_info *info = calloc(1, sizeof(*info));
    if (info == NULL || (info->name = inspect_strndup(name, strlen(name))) == NULL) {
        free(info);
        return rlk_err(RLOCK_ENOMEM, "rlock_inspect: out of memory");
    }
    redisReply *rep = NULL;
    rc = inspect_run(client, info, &rep);
    rc = rc ? rc : inspect_parse(rep, info);
    if (rep != NULL) {
        freeReplyObject(rep);
    }
    if (rc != RLOCK_OK) {
        rlock_lock_info_free(info);
        return rc;
    }
    *out = info;
    return RLOCK_OK;
}

static void free_waiters(rlock_lock_waiter *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(w[i].owner);
    }
    free(w);
}

RLOCK_EXPORT void rlock_lock_info_free(rlock_lock_info *info)
{
    if (info == NULL) {
        return;
    }
    for (size_t i = 0; i < info->n_holders; i++) {
        free(info->holders[i].owner);
    }
    free(info->holders);
    free_waiters(info->queue, info->n_queue);
    free_waiters(info->writers, info->n_writers);
    free_waiters(info->waiters, info->n_waiters);
    free(info->name);
    free(info);
}
