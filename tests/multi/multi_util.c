#include "multi_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* Under a sanitizer the stress tests run half their iterations: ASan and TSan check each path
 * as it runs, and half of 2,000 acquisitions a thread still takes every path many times, while
 * the full count cost ASan 36 s for test_multi_stress (20 s plain). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MU_SANITIZED 1
#endif
#endif

rlock_client *mu_client(const char *url, int64_t watchdog_ms, int64_t server_timeout_ms)
{
    rlock_options o;
    tc_options_url(&o, url);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    if (server_timeout_ms > 0) {
        o.redlock_server_timeout_ms = server_timeout_ms;
    }
    return tc_client_try(&o);
}

int mu_start(rh_server **srv, int n)
{
    rh_skip_if_unavailable();
    for (int i = 0; i < n; i++) {
        srv[i] = rh_start(NULL);
        if (srv[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

int mu_clients(rlock_client **cli, rh_server **srv, int n, int64_t watchdog_ms,
               int64_t server_timeout_ms)
{
    for (int i = 0; i < n; i++) {
        cli[i] = mu_client(rh_url(srv[i]), watchdog_ms, server_timeout_ms);
        if (cli[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

void mu_close(rlock_client **cli, rh_server **srv, int n)
{
    for (int i = 0; i < n; i++) {
        rlock_client_free(cli[i]);
        cli[i] = NULL;
        if (srv != NULL) {
            rh_free(srv[i]);
            srv[i] = NULL;
        }
    }
}

int mu_check_enter(redisContext *c, const char *name)
{
    redisReply *r = redisCommand(c, "SET chk:%s 1 NX PX 60000", name);
    if (r == NULL) {
        return -1;
    }
    int violation = r->type != REDIS_REPLY_STATUS;
    freeReplyObject(r);
    r = redisCommand(c, "GET cnt:%s", name);
    if (r == NULL) {
        return -1;
    }
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    r = redisCommand(c, "SET cnt:%s %lld", name, v + 1);
    if (r == NULL) {
        return -1;
    }
    freeReplyObject(r);
    return violation;
}

int mu_check_leave(redisContext *c, const char *name)
{
    redisReply *r = redisCommand(c, "DEL chk:%s", name);
    if (r == NULL) {
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

long long mu_counter(redisContext *c, const char *name)
{
    redisReply *r = redisCommand(c, "GET cnt:%s", name);
    if (r == NULL) {
        return -1;
    }
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

long long mu_int(rh_server *s, const char *const *argv)
{
    return rh_cmd_int(s, argv);
}

long long mu_exists(rh_server *s, const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(s, argv);
}

long long mu_hlen(rh_server *s, const char *key)
{
    const char *argv[] = {"HLEN", key, NULL};
    return rh_cmd_int(s, argv);
}

double mu_scale(void)
{
    const char *e = getenv("RLOCK_STRESS_SCALE");
    if (e != NULL && atof(e) > 0) {
        return atof(e) / 100.0;
    }
#ifdef MU_SANITIZED
    return 0.5;
#else
    return 1.0;
#endif
}

void mu_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms % 1000) * 1000000)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void mu_group_make(mu_group *gr, size_t n, rlock *(*make)(rlock *const *locks, size_t n))
{
    gr->n = n;
    gr->g = make(gr->m, n);
    assert_non_null(gr->g);
}

void mu_group_close(mu_group *gr)
{
    rlock_free(gr->g);
    for (size_t i = 0; i < gr->n; i++) {
        rlock_free(gr->m[i]);
    }
}
