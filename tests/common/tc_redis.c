#include "tc_redis.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

long long tc_int(redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    long long v = TC_INT_ERROR;
    if (r == NULL) {
        return v;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r->type == REDIS_REPLY_STRING) {
        v = strtoll(r->str, NULL, 10);
    } else if (r->type == REDIS_REPLY_NIL) {
        v = 0;
    } else if (r->type == REDIS_REPLY_STATUS) {
        v = 1;
    }
    freeReplyObject(r);
    return v;
}

void tc_tls_options(rlock_options *o)
{
    static char ca[4096];
    const char *dir = rh_tls_dir();
    if (dir != NULL) {
        snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
        o->tls_ca_file = ca;
    }
}

long long tc_array_len(rh_server *s, const char *const *argv)
{
    redisReply *r = rh_cmd(s, argv);
    long long n = r != NULL && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (r != NULL) {
        freeReplyObject(r);
    }
    return n;
}

long long tc_hash_only_value(rh_server *s, const char *key)
{
    const char *argv[] = {"HVALS", key, NULL};
    redisReply *r = rh_cmd(s, argv);
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        v = strtoll(r->element[0]->str, NULL, 10);
    }
    freeReplyObject(r);
    return v;
}

long long tc_numsub(rh_server *s, const char *channel)
{
    const char *argv[] = {"PUBSUB", "NUMSUB", channel, NULL};
    redisReply *r = rh_cmd(s, argv);
    long long n = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER) {
        n = r->element[1]->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return n;
}

/* Polls count(s, channel) until it is want or ms passed; 1 if it got there, 0 if not. */
static int tc_wait_count(long long (*count)(rh_server *, const char *), rh_server *s,
                         const char *channel, long long want, int64_t ms)
{
    int64_t deadline = rh_now_ms() + ms;
    while (count(s, channel) != want) {
        if (rh_now_ms() >= deadline) {
            return 0;
        }
        rh_sleep_ms(5);
    }
    return 1;
}

int tc_wait_numsub(rh_server *s, const char *channel, long long want, int64_t ms)
{
    return tc_wait_count(tc_numsub, s, channel, want, ms);
}

long long tc_listeners(rh_server *s, const char *channel)
{
    const char *argv[] = {"CLIENT", "LIST", "TYPE", "pubsub", NULL};
    long long n = tc_numsub(s, channel);
    redisReply *r = n >= 0 ? rh_cmd(s, argv) : NULL;
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        n = -1;
    }
    for (const char *p = n >= 0 ? r->str : NULL; p != NULL && (p = strstr(p, " psub=")) != NULL;
         p += 6) {
        n += p[6] != '0';
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return n;
}

int tc_wait_listeners(rh_server *s, const char *channel, long long want, int64_t ms)
{
    return tc_wait_count(tc_listeners, s, channel, want, ms);
}

void tc_options_url(rlock_options *o, const char *url)
{
    rlock_options_init(o);
    o->url = url;
    o->pool_size = 16;
    tc_tls_options(o);
}

void tc_options(rlock_options *o, const rh_server *s)
{
    tc_options_url(o, rh_url(s));
}

rlock_client *tc_client_try(const rlock_options *o)
{
    rlock_client *c = NULL;
    int r = rlock_client_new(o, &c);
    if (r != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s: %s\n", o->url != NULL ? o->url : "(null)",
                rlock_strerror(r), rlock_last_error());
        return NULL;
    }
    return c;
}

rlock_client *tc_client(const rlock_options *o)
{
    rlock_client *c = NULL;
    int r = rlock_client_new(o, &c);
    if (r != RLOCK_OK) {
        fail_msg("rlock_client_new(%s): %s: %s", o->url != NULL ? o->url : "(null)",
                 rlock_strerror(r), rlock_last_error());
    }
    return c;
}

const char *tc_path_arg(int argc, char **argv, const char *what)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <%s>\n", argv[0], what);
        exit(2);
    }
    return argv[1];
}

int tc_require_server(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    return 0;
}

rh_server *tc_start(void)
{
    rh_server *s = rh_start(NULL);
    if (s == NULL) {
        fail_msg("rh_start: no redis-server started");
    }
    return s;
}

int tc_server_setup(void **state)
{
    rh_skip_if_unavailable();
    rh_server *s = rh_start(NULL);
    *state = s;
    return s == NULL ? -1 : 0;
}

int tc_server_teardown(void **state)
{
    rh_free(*state);
    *state = NULL;
    return 0;
}

/* What one per-kind test needs: the check, its kind, and the server its setup started. */
typedef struct tc_kind_case {
    tc_kind_check check;
    rlock_kind kind;
    int (*prepare)(rh_server *s);
    rh_server *srv;
} tc_kind_case;

static int kind_setup(void **state)
{
    tc_kind_case *k = *state;
    k->srv = rh_start(NULL);
    if (k->srv == NULL) {
        return -1;
    }
    return k->prepare != NULL ? k->prepare(k->srv) : 0;
}

static int kind_teardown(void **state)
{
    tc_kind_case *k = *state;
    rh_free(k->srv);
    k->srv = NULL;
    return 0;
}

static void kind_test(void **state)
{
    tc_kind_case *k = *state;
    k->check(k->srv, k->kind);
}

int tc_run_per_kind(const char *group, tc_kind_check check, int (*prepare)(rh_server *s))
{
    static const char *const names[] = {"test_reentrant", "test_fair", "test_read", "test_write"};
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    tc_kind_case cases[4];
    struct CMUnitTest tests[4];

    rh_skip_if_unavailable();
    for (size_t i = 0; i < 4; i++) {
        cases[i] = (tc_kind_case){.check = check, .kind = kinds[i], .prepare = prepare};
        tests[i] = (struct CMUnitTest){.name = names[i],
                                       .test_func = kind_test,
                                       .setup_func = kind_setup,
                                       .teardown_func = kind_teardown,
                                       .initial_state = &cases[i]};
    }
    return _cmocka_run_group_tests(group, tests, 4, NULL, NULL);
}

rlock_client *tc_client_ex(const rh_server *s, int64_t watchdog_ms, int64_t command_timeout_ms,
                           void (*on_lost)(const char *name, void *user), void *user)
{
    rlock_options o;
    tc_options(&o, s);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    if (command_timeout_ms > 0) {
        o.command_timeout_ms = command_timeout_ms;
        o.connect_timeout_ms = command_timeout_ms;
    }
    o.on_lost = on_lost;
    o.user_data = user;
    return tc_client_try(&o);
}

rlock_client *tc_client_tuned(const rh_server *s, int64_t watchdog_ms, int64_t command_timeout_ms,
                              void (*on_lost)(const char *name, void *user), void *user)
{
    rlock_client *c = tc_client_ex(s, watchdog_ms, command_timeout_ms, on_lost, user);
    if (c == NULL) {
        fail_msg("no client on %s: %s", rh_url(s), rlock_last_error());
    }
    return c;
}

rlock *tc_open(rlock_client *c, rlock_kind kind, const char *name)
{
    rlock *l = rlock_open(c, kind, name);
    if (l == NULL) {
        fail_msg("rlock_open(%s): %s", name, rlock_last_error());
    }
    return l;
}

void tc_orphan_handles(rlock_client *c, const char *held_name, const char *idle_name, rlock **held,
                       rlock **idle)
{
    *held = tc_open(c, RLOCK_REENTRANT, held_name);
    *idle = tc_open(c, RLOCK_REENTRANT, idle_name);
    /* A watchdog hold that is still registered when the client goes away. */
    assert_int_equal(rlock_lock(*held, -1), RLOCK_OK);
    rlock_client_free(c);
}

rlock_client *tc_client_defaults(const rh_server *s)
{
    rlock_options o;

    rlock_options_init(&o);
    o.url = rh_url(s);
    return tc_client(&o);
}

rlock *tc_open_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c)
{
    *c = tc_client_defaults(s);
    return tc_open(*c, kind, name);
}

rlock *tc_hold(rlock_client *c, rlock_kind kind, const char *name)
{
    rlock *l = tc_open(c, kind, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    return l;
}

rlock *tc_hold_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c)
{
    *c = tc_client_defaults(s);
    return tc_hold(*c, kind, name);
}

void tc_close_own(rlock *l, rlock_client *c)
{
    rlock_free(l);
    rlock_client_free(c);
}

void tc_lock_unlock(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    assert_int_equal(rlock_try_lock(l, wait_ms, lease_ms), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
}

rlock_client *tc_client_as(const rlock_options *o, const rh_server *s, const char *user,
                           const char *pw)
{
    char url[256];
    rlock_options as = *o;

    snprintf(url, sizeof(url), "redis://%s:%s@127.0.0.1:%d", user, pw, rh_port(s));
    as.url = url;
    return tc_client(&as);
}

int tc_fixture_open(rh_server **srv, rlock_client **c, void (*tune)(rlock_options *o))
{
    rh_skip_if_unavailable();
    if (c != NULL) {
        *c = NULL;
    }
    *srv = rh_start(NULL);
    if (*srv == NULL || c == NULL) {
        return *srv == NULL ? -1 : 0;
    }
    rlock_options o;
    tc_options(&o, *srv);
    if (tune != NULL) {
        tune(&o);
    }
    *c = tc_client_try(&o);
    return *c == NULL ? -1 : 0;
}

int tc_fixture_close(rh_server **srv, rlock_client **c)
{
    if (c != NULL) {
        rlock_client_free(*c);
        *c = NULL;
    }
    rh_free(*srv);
    *srv = NULL;
    return 0;
}

int tc_fixture_open_raw(rh_server **srv, rlock_client **c, redisContext **raw)
{
    *raw = NULL;
    if (tc_fixture_open(srv, c, NULL) != 0) {
        return -1;
    }
    *raw = rh_connect(*srv);
    return *raw == NULL ? -1 : 0;
}

int tc_fixture_close_raw(rh_server **srv, rlock_client **c, redisContext **raw)
{
    if (*raw != NULL) {
        redisFree(*raw);
        *raw = NULL;
    }
    return tc_fixture_close(srv, c);
}
