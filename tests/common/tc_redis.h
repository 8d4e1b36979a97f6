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

/* The number of elements of the array reply that argv (NULL-terminated, run on s's admin
 * connection) gets, as from KEYS or PUBSUB CHANNELS; -1 on any other reply. */
long long tc_array_len(rh_server *s, const char *const *argv);

/* The value of the one field of the hash at key (a lock's hold count), or -1 when the hash does
 * not have exactly one field. */
long long tc_hash_only_value(rh_server *s, const char *key);

/* PUBSUB NUMSUB: the number of subscribers of channel on s, or -1. */
long long tc_numsub(rh_server *s, const char *channel);

/* Polls tc_numsub() until it is want or ms passed; 1 if it got there, 0 if not. */
int tc_wait_numsub(rh_server *s, const char *channel, long long want, int64_t ms);

/* The connections listening on channel: tc_numsub() plus the pub/sub clients subscribed to any
 * pattern (CLIENT LIST psub > 0), since rlock's reentrant waiters listen on Redisson's channel
 * through a pattern matching it alone, which NUMSUB does not count. Exact while no other pattern
 * is subscribed on s; -1 on error. */
long long tc_listeners(rh_server *s, const char *channel);

/* Polls tc_listeners() until it is want or ms passed; 1 if it got there, 0 if not. */
int tc_wait_listeners(rh_server *s, const char *channel, long long want, int64_t ms);

/* Options for server s (url, a pool of 16, the library's timeouts, the test CA when the program
 * runs over TLS): the base every test edits. */
void tc_options(rlock_options *o, const rh_server *s);

/* The same for a URL (a child process knows its server only by URL or port). */
void tc_options_url(rlock_options *o, const char *url);

/* A client from o, or NULL after printing rlock's message to stderr: for child processes, which
 * must report failure through their exit status rather than through cmocka. */
rlock_client *tc_client_try(const rlock_options *o);

/* A client from o; fails the running cmocka test with rlock's message when there is none. */
rlock_client *tc_client(const rlock_options *o);

/* rh_start(NULL): a fresh redis-server, failing the running test when none starts. */
rh_server *tc_start(void);

/* A cmocka setup/teardown pair: *state becomes a fresh redis-server (rh_server *), which the
 * teardown stops. The setup skips the whole program when redis-server is missing. */
int tc_server_setup(void **state);
int tc_server_teardown(void **state);

/* The one command-line argument of a test program that is given a path (the binary or
 * directory it tests): argv[1], or exit(2) after printing a usage line naming what. */
const char *tc_path_arg(int argc, char **argv, const char *what);

/* A cmocka group setup for programs whose tests start their own servers: skips the whole
 * program (exit 77) when redis-server is missing. */
int tc_require_server(void **state);

/* A cmocka test that gets a fresh redis-server of its own as *state (tc_server_setup). */
#define TC_SERVER_TEST(f) cmocka_unit_test_setup_teardown(f, tc_server_setup, tc_server_teardown)

/* Defines a test program's main(): the cmocka tests given after setup and teardown (group
 * functions or NULL) run as one group. */
#define TC_MAIN(setup, teardown, ...)                                                              \
    int main(void)                                                                                 \
    {                                                                                              \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, setup, teardown);                                     \
    }

/* TC_MAIN() for a program given one path (tc_path_arg(), named what), stored in var first. */
#define TC_MAIN_PATH(var, what, setup, teardown, ...)                                              \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        (var) = tc_path_arg(argc, argv, (what));                                                   \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, setup, teardown);                                     \
    }

/* A check run once for every single-key lock kind (reentrant, fair, read, write), each time on a
 * fresh server. */
typedef void (*tc_kind_check)(rh_server *s, rlock_kind kind);

/* Runs check as the cmocka group `group` of four tests named test_reentrant, test_fair,
 * test_read and test_write, each on its own fresh server; prepare (or NULL) readies that server
 * first (an ACL user, say) and returns 0, or -1 to fail the test's setup. Returns cmocka's
 * result; skips the whole program when redis-server is missing. */
int tc_run_per_kind(const char *group, tc_kind_check check, int (*prepare)(rh_server *s));

/* A client on s (tc_options()) with the given watchdog timeout and command (and connect)
 * timeout, each only when > 0, and on_lost callback (NULL: none) with user; NULL after printing
 * rlock's message when there is none (usable in child processes). */
rlock_client *tc_client_ex(const rh_server *s, int64_t watchdog_ms, int64_t command_timeout_ms,
                           void (*on_lost)(const char *name, void *user), void *user);

/* tc_client_ex() that fails the running test with rlock's message when there is no client. */
rlock_client *tc_client_tuned(const rh_server *s, int64_t watchdog_ms, int64_t command_timeout_ms,
                              void (*on_lost)(const char *name, void *user), void *user);

/* rlock_open(c, kind, name), failing the running test with rlock's message when it gives no
 * handle. */
rlock *tc_open(rlock_client *c, rlock_kind kind, const char *name);

/* The two handles that outlive their client: on c, *held (a watchdog hold of held_name) and
 * *idle (idle_name, never locked); then frees c, so that calls on both answer RLOCK_ECLOSED. */
void tc_orphan_handles(rlock_client *c, const char *held_name, const char *idle_name, rlock **held,
                       rlock **idle);

/* A client on s with the library's default options (as a user's would be); fails the running
 * test with rlock's message when there is none. */
rlock_client *tc_client_defaults(const rh_server *s);

/* A client of its own on s (tc_client_defaults()) in *c, and its handle on name (tc_open()). */
rlock *tc_open_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c);

/* tc_open(c, kind, name) and the handle's watchdog hold (rlock_lock(l, -1)); fails the running
 * test when the lock is not granted. */
rlock *tc_hold(rlock_client *c, rlock_kind kind, const char *name);

/* tc_open_own() and the handle's watchdog hold (rlock_lock(l, -1)); fails the running test when
 * the lock is not granted. */
rlock *tc_hold_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c);

/* Frees l and then c, its client: the end of a handle and client a test made for itself (as
 * tc_open_own() gives them). */
void tc_close_own(rlock *l, rlock_client *c);

/* rlock_try_lock(l, wait_ms, lease_ms) and then rlock_unlock(l), failing the running test unless
 * both return RLOCK_OK: shows that the lock is free (again) for l's owner. */
void tc_lock_unlock(rlock *l, int64_t wait_ms, int64_t lease_ms);

/* A client from o, but logged in to s as ACL user (password pw); fails the running test with
 * rlock's message when there is none. */
rlock_client *tc_client_as(const rlock_options *o, const rh_server *s, const char *user,
                           const char *pw);

/* The fixture most programs share: a server and one client on it (tc_options(), then tune() when
 * not NULL) into *srv and *c (no client when c is NULL); -1 (after a message) when either cannot
 * be had. Skips the whole program when redis-server is missing. tc_fixture_close() frees both
 * and always returns 0. */
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

/* tc_fixture_open() (no tune) plus a raw admin connection to the server (rh_connect) in *raw;
 * tc_fixture_close_raw() frees all three. TC_FIXTURE_RAW defines setup() and teardown() on
 * a program's globals srv, client and raw. */
int tc_fixture_open_raw(rh_server **srv, rlock_client **c, redisContext **raw);
int tc_fixture_close_raw(rh_server **srv, rlock_client **c, redisContext **raw);
#define TC_FIXTURE_RAW(srv, client, raw)                                                           \
    static int setup(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_open_raw(&(srv), &(client), &(raw));                                     \
    }                                                                                              \
    static int teardown(void **state)                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_close_raw(&(srv), &(client), &(raw));                                    \
    }

/* Defines a program's static cmocka group setup() and teardown() that start and stop one
 * redis-server in its global srv (the server-only form of TC_FIXTURE). */
#define TC_SERVER_FIXTURE(srv)                                                                     \
    static int setup(void **state)                                                                 \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_open(&(srv), NULL, NULL);                                                \
    }                                                                                              \
    static int teardown(void **state)                                                              \
    {                                                                                              \
        (void)state;                                                                               \
        return tc_fixture_close(&(srv), NULL);                                                     \
    }

#endif
