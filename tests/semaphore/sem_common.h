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
#include "tc_redis.h"

/* A client on s (tc_options()) with the given watchdog timeout (0 = default) and on_lost
 * callback; NULL after a message when there is none. */
static inline rlock_client *sc_client_ex(const rh_server *s, int64_t watchdog_ms,
                                         void (*on_lost)(const char *, void *), void *user)
{
    rlock_options o;
    tc_options(&o, s);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    o.on_lost = on_lost;
    o.user_data = user;
    return tc_client_try(&o);
}

static inline rlock_client *sc_client(const rh_server *s)
{
    return sc_client_ex(s, 0, NULL, NULL);
}

#endif
