/*
 * The test programs' one Redis-side toolbox: the integer-reply helper, the client factory and the
 * cmocka setup/teardown pair that gives a test its own redis-server. Part of the rlock_testcommon
 * library that rlock_add_test() links into every test.
 */
#ifndef RLOCK_TESTS_TC_REDIS_H
#define RLOCK_TESTS_TC_REDIS_H

#include <hiredis.h>

#include "redis_harness.h"
#include "rlock.h"

/* Runs a command given as argc argv strings on ctx and returns its integer reply (a decimal
 * string is converted, nil is 0, a status is 1); TC_INT_ERROR on any error, so that a caller can
 * assert on it. */
#define TC_INT_ERROR (-1000000LL)
long long tc_int(redisContext *ctx, int argc, const char **argv);

/* When the program runs over TLS ($RH_TLS_DIR set: rh_start() gives TLS servers), makes o trust
 * the test CA; otherwise leaves o alone. For code that builds options from a URL itself. */
void tc_tls_options(rlock_options *o);

/* Options for server s (url, a pool of 16, the library's timeouts, the test CA when the program
 * runs over TLS): the base every test edits. */
void tc_options(rlock_options *o, const rh_server *s);

/* A client from o, or NULL after printing rlock's message to stderr: for child processes, which
 * must report failure through their exit status rather than through cmocka. */
rlock_client *tc_client_try(const rlock_options *o);

/* A client from o; fails the running cmocka test with rlock's message when there is none. */
rlock_client *tc_client(const rlock_options *o);

/* A cmocka setup/teardown pair: *state becomes a fresh redis-server (rh_server *), which the
 * teardown stops. The setup skips the whole program when redis-server is missing. */
int tc_server_setup(void **state);
int tc_server_teardown(void **state);

/* The fixture most programs share: a server and one client on it (tc_options(), then tune() when
 * not NULL) into *srv and *c; -1 (after a message) when either cannot be had. Skips the whole
 * program when redis-server is missing. tc_fixture_close() frees both and always returns 0. */
int tc_fixture_open(rh_server **srv, rlock_client **c, void (*tune)(rlock_options *o));
int tc_fixture_close(rh_server **srv, rlock_client **c);

/* Defines a program's static cmocka group setup() and teardown(): tc_fixture_open() and
 * tc_fixture_close() on its globals srv and client, with tune (a function or NULL). */
#define TC_FIXTURE(srv, client, tune)                                                              \
    static int setup(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_open(&(srv), &(client), (tune));                                         \
    }                                                                                              \
    static int teardown(void **state)                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_close(&(srv), &(client));                                                \
    }

#endif
