/*
 * Helpers shared by the semaphore and latch tests (tests/semaphore/). Everything is static
 * inline; the header has no state. Threads never share the harness' cached admin connection
 * (rh_cmd*), which is not thread-safe: a thread that talks to Redis opens its own connection.
 */
#ifndef RLOCK_TESTS_SEM_COMMON_H
#define RLOCK_TESTS_SEM_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "redis_harness.h"
#include "rlock.h"

/* A client on port with the given watchdog timeout (0 = default) and on_lost callback. */
static inline rlock_client *sc_client_ex(int port, int64_t watchdog_ms,
                                         void (*on_lost)(const char *, void *), void *user)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    o.pool_size = 16;
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    o.on_lost = on_lost;
    o.user_data = user;
    rlock_client *c = NULL;
    int r = rlock_client_new(&o, &c);
    if (r != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s: %s\n", url, rlock_strerror(r),
                rlock_last_error());
        return NULL;
    }
    return c;
}

static inline rlock_client *sc_client(const rh_server *s)
{
    return sc_client_ex(rh_port(s), 0, NULL, NULL);
}

/* An integer from an integer, numeric string or nil (0) reply of a raw connection; -1000000
 * on anything else. */
static inline long long sc_int(redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    long long v = -1000000;
    if (r != NULL) {
        if (r->type == REDIS_REPLY_INTEGER) {
            v = r->integer;
        } else if (r->type == REDIS_REPLY_STRING) {
            v = strtoll(r->str, NULL, 10);
        } else if (r->type == REDIS_REPLY_NIL) {
            v = 0;
        }
        freeReplyObject(r);
    }
    return v;
}

#endif
