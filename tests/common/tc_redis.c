#include "tc_redis.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

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

void tc_options(rlock_options *o, const rh_server *s)
{
    rlock_options_init(o);
    o->url = rh_url(s);
    o->pool_size = 16;
    tc_tls_options(o);
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

int tc_fixture_open(rh_server **srv, rlock_client **c, void (*tune)(rlock_options *o))
{
    rh_skip_if_unavailable();
    *c = NULL;
    *srv = rh_start(NULL);
    if (*srv == NULL) {
        return -1;
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
    rlock_client_free(*c);
    rh_free(*srv);
    *c = NULL;
    *srv = NULL;
    return 0;
}
