/*
 * Helpers shared by the reentrant lock's test programs (tests/reentrant/). Everything is static
 * so each program compiles its own copy; the header has no state of its own.
 *
 * Threads in these tests never share the harness' cached admin connection (rh_cmd*), which is
 * not thread-safe: a thread that talks to Redis directly opens its own with rh_connect().
 */
#ifndef RLOCK_TESTS_RE_COMMON_H
#define RLOCK_TESTS_RE_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

/* A client on server s with tc_options(); NULL (after printing why) on failure. */
static inline rlock_client *re_client(const rh_server *s)
{
    return tc_client_ex(s, 0, 0, NULL, NULL);
}

/* The fencing counter key of a lock name without '{': "redisson_lock_token:{name}". */
static inline void re_token_key(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "redisson_lock_token:{%s}", name);
}

/* The pub/sub channel of a lock name without '{': "redisson_lock__channel:{name}". */
static inline void re_channel(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "redisson_lock__channel:{%s}", name);
}

/* Runs fn(arg) on a new thread and returns its result (a pointer-sized int). */
static inline intptr_t re_run_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) {
        return -1000;
    }
    void *res = NULL;
    pthread_join(t, &res);
    return (intptr_t)res;
}

/* Number of channels in PUBSUB CHANNELS, or -1 on error. */
static inline long long re_pubsub_channels(rh_server *s)
{
    const char *argv[] = {"PUBSUB", "CHANNELS", NULL};
    return tc_array_len(s, argv);
}

/* Polls PUBSUB CHANNELS until it is empty or ms passed; returns the last count seen. */
static inline long long re_wait_no_channels(rh_server *s, int64_t ms)
{
    int64_t deadline = rh_now_ms() + ms;
    long long n = re_pubsub_channels(s);
    while (n != 0 && rh_now_ms() < deadline) {
        rh_sleep_ms(10);
        n = re_pubsub_channels(s);
    }
    return n;
}

#endif
