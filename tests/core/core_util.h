/*
 * Small helpers shared by the core acceptance tests (tests/core/test_*.c): options pointing at a
 * harness server, counting CLIENT LIST lines, and a raw connection on another database.
 */
#ifndef RLOCK_TESTS_CORE_UTIL_H
#define RLOCK_TESTS_CORE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

/* Options for server s with small timeouts, so that a failure shows up fast. */
static inline void cu_opts(rlock_options *o, const rh_server *s)
{
    rlock_options_init(o);
    o->url = rh_url(s);
    tc_tls_options(o);
    o->pool_size = 4;
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
}

/* A client on s with cu_opts(); fails the running test when there is none. */
static inline rlock_client *cu_client(const rh_server *s)
{
    rlock_options o;
    cu_opts(&o, s);
    return tc_client(&o);
}

/* The number of connections CLIENT LIST TYPE type reports, or -1. */
static inline int cu_client_count(rh_server *s, const char *type)
{
    const char *argv[] = {"CLIENT", "LIST", "TYPE", type, NULL};
    char *list = rh_cmd_str(s, argv);
    if (list == NULL) {
        return -1;
    }
    int n = 0;
    for (const char *p = list; (p = strstr(p, "id=")) != NULL; p += 3) {
        n++;
    }
    free(list);
    return n;
}

/* 1 if key exists in database db (checked on a fresh raw connection), 0 if not, -1 on error. */
static inline int cu_exists_in_db(const rh_server *s, int db, const char *key)
{
    redisContext *c = rh_connect(s);
    if (c == NULL) {
        return -1;
    }
    int result = -1;
    redisReply *r = redisCommand(c, "SELECT %d", db);
    if (r != NULL && r->type == REDIS_REPLY_STATUS) {
        freeReplyObject(r);
        r = redisCommand(c, "EXISTS %s", key);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
            result = (int)r->integer;
        }
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(c);
    return result;
}

/* After a server outage the pool may refuse dials for its backoff (at most 1 s) with a fast
 * RLOCK_ECONN. Retries a single-attempt try_lock on l until it succeeds or ms pass; returns the
 * last result and stores the time it took in *took_ms. */
static inline int cu_lock_works_within(rlock *l, int64_t ms, int64_t *took_ms)
{
    int64_t t0 = rh_now_ms();
    int r;
    while ((r = rlock_try_lock(l, 0, 10000)) == RLOCK_ECONN && rh_now_ms() - t0 < ms) {
        rh_sleep_ms(20);
    }
    *took_ms = rh_now_ms() - t0;
    return r;
}

/* Starts a server or skips the whole program when redis-server is missing. */
static inline rh_server *cu_start(const char *const *extra)
{
    rh_skip_if_unavailable();
    return rh_start(extra);
}

#endif
