/*
 * Pub/sub on a real cluster in both modes of rlock_options.cluster_pubsub: the option is
 * checked; auto picks sharded on Redis 7 as Redisson's probe does; a sharded client's releases
 * SPUBLISH (a raw SSUBSCRIBE on the slot's master hears "smessage"), a classic one's PUBLISH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>
#include <hiredis.h>

#include "client.h"
#include "tc_cluster.h"
#include "tc_redis.h"

/* A client on the cluster in pub/sub mode mode. */
static rlock_client *ps_client(int mode)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.cluster_pubsub = mode;
    return tc_client(&o);
}

static void test_option_checked(void **state)
{
    (void)state;
    int bad[] = {-1, 3, 1000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rlock_options o;
        tc_options_url(&o, rc_seed_url(tc_cl));
        o.cluster_pubsub = bad[i];
        rlock_client *c = NULL;
        assert_int_equal(rlock_client_new(&o, &c), RLOCK_EINVAL);
        assert_null(c);
        assert_non_null(strstr(rlock_last_error(), "cluster_pubsub"));
    }
}

/* Redis 7 answers PUBSUB SHARDNUMSUB: auto is sharded there, as in Redisson; the forced modes are
 * what they say. */
static void test_mode_chosen(void **state)
{
    (void)state;
    int want[] = {1, 1, 0};
    int modes[] = {RLOCK_CLUSTER_PUBSUB_AUTO, RLOCK_CLUSTER_PUBSUB_SHARDED,
                   RLOCK_CLUSTER_PUBSUB_CLASSIC};
    for (int i = 0; i < 3; i++) {
        rlock_client *c = ps_client(modes[i]);
        assert_int_equal(c->sharded, want[i]);
        rlock_client_free(c);
    }
}

/* A raw connection to the master of name's slot subscribed to channel with cmd (SUBSCRIBE or
 * SSUBSCRIBE), its confirmation read. */
static redisContext *raw_listen(const char *name, const char *cmd, const char *channel)
{
    redisContext *ctx = rh_connect(tc_cluster_owner(name));
    assert_non_null(ctx);
    struct timeval tv = {10, 0};
    redisSetTimeout(ctx, tv);
    redisReply *r = redisCommand(ctx, "%s %s", cmd, channel);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    return ctx;
}

/* Reads the next push on ctx and checks it is kind on channel with payload. */
static void raw_expect(redisContext *ctx, const char *kind, const char *channel,
                       const char *payload)
{
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(ctx, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, kind);
    assert_string_equal(r->element[1]->str, channel);
    assert_string_equal(r->element[2]->str, payload);
    freeReplyObject(r);
}

/* One release of a reentrant lock on each master, heard where the mode publishes it. */
static void release_heard(int mode, const char *listen, const char *kind)
{
    rlock_client *c = ps_client(mode);
    for (int i = 0; i < 3; i++) {
        char name[64];
        char channel[96];
        tc_cluster_name_on(i, "heard-", name, sizeof(name));
        snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
        redisContext *ctx = raw_listen(name, listen, channel);
        rlock *l = tc_open(c, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_lock(l, 30000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        raw_expect(ctx, kind, channel, "0");
        rlock_free(l);
        redisFree(ctx);
    }
    rlock_client_free(c);
}

static void test_sharded_release_spublishes(void **state)
{
    (void)state;
    release_heard(RLOCK_CLUSTER_PUBSUB_SHARDED, "SSUBSCRIBE", "smessage");
}

static void test_classic_release_publishes(void **state)
{
    (void)state;
    release_heard(RLOCK_CLUSTER_PUBSUB_CLASSIC, "SUBSCRIBE", "message");
}

TC_MAIN(tc_cluster_setup, tc_cluster_teardown, cmocka_unit_test(test_option_checked),
        cmocka_unit_test(test_mode_chosen), cmocka_unit_test(test_sharded_release_spublishes),
        cmocka_unit_test(test_classic_release_publishes))
