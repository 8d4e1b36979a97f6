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

/* A client on s with tc_options(); NULL (after printing why) on failure. */
static inline rlock_client *sc_client(const rh_server *s)
{
    return tc_client_ex(s, 0, 0, NULL, NULL);
}

/* Frees s and then c, its client (the end of a semaphore a test opened on a client of its own). */
static inline void sc_close(rlock_semaphore *s, rlock_client *c)
{
    rlock_semaphore_free(s);
    rlock_client_free(c);
}

#endif
