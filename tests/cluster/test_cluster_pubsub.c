/*
 * Pub/sub on a real cluster in both modes of rlock_options.cluster_pubsub: the option is
 * checked; auto picks sharded on Redis 7 as Redisson's probe does; a sharded client's releases
 * SPUBLISH (a raw SSUBSCRIBE on the slot's master hears "smessage"), a classic one's PUBLISH;
 * in either mode waiters of every lock kind on all three masters are woken by a release (a
 * subscriber message counted, the holder's lease far longer than the wait), sharded waiters
 * listening with SSUBSCRIBE on the master that owns the lock's slot; a sharded waiter whose slot
 * migrates is subscribed again on the new owner and woken by the release there; an SSUBSCRIBE
 * answered MOVED is sent again to the owner; a killed node connection is dialled again and its
 * channels subscribed again.
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
#include "cluster.h"
#include "cluster_slot.h"
#include "pubsub.h"
#include "pubsub_conn.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_thread.h"

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

/* Shard channels of master s whose name contains name ({name} tagged), as PUBSUB SHARDCHANNELS
 * (sharded 1) or PUBSUB CHANNELS lists them. */
static long long channels_of(rh_server *s, const char *name, int sharded)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "*{%s}*", name);
    const char *argv[] = {"PUBSUB", sharded ? "SHARDCHANNELS" : "CHANNELS", pat, NULL};
    return tc_array_len(s, argv);
}

/* The kind the holder takes so that a waiter of kind waits: a reader waits for a writer. */
static rlock_kind holder_kind(rlock_kind kind)
{
    return kind == RLOCK_READ ? RLOCK_WRITE : kind;
}

/* A holder's lock on name (client h; its lease outlasts every wait) and a waiter of kind (client
 * w) waiting for it on a thread of its own. */
typedef struct wake_scene {
    rlock_client *w;
    rlock *hl, *wl;
    tc_holder wh;
    const char *name;
    rlock_kind kind;
} wake_scene;

static void scene_start(wake_scene *sc, rlock_client *h, rlock_client *w, rlock_kind kind,
                        const char *name)
{
    sc->w = w;
    sc->name = name;
    sc->kind = kind;
    sc->hl = tc_open(h, holder_kind(kind), name);
    sc->wl = tc_open(w, kind, name);
    assert_int_equal(rlock_try_lock(sc->hl, 0, 60000), RLOCK_OK);
    tc_holder_start(&sc->wh, sc->wl, 20000, 30000, 0);
}

/* The holder releases; the waiter, still waiting, gets the lock, and its subscriber read a
 * message since it subscribed. Frees the handles. */
static void scene_release_wakes(wake_scene *sc)
{
    rh_sleep_ms(100); /* the confirmation's re-attempt found the lock busy */
    uint64_t before = rlk_pubsub_messages(sc->w->pubsub);
    assert_int_equal(tc_holder_wait(&sc->wh, 0), TC_BG_RUNNING);
    assert_int_equal(rlock_unlock(sc->hl), RLOCK_OK);
    assert_int_equal(tc_holder_wait(&sc->wh, 20000), RLOCK_OK);
    tc_holder_join(&sc->wh);
    assert_int_equal(sc->wh.unlock_rc, RLOCK_OK);
    if (rlk_pubsub_messages(sc->w->pubsub) <= before) {
        fail_msg("%s waiter of kind %d got the lock without a message", sc->name, (int)sc->kind);
    }
    rlock_free(sc->wl);
    rlock_free(sc->hl);
}

/* A waiter of kind on name (client w) is woken by the release of holder client h, once its
 * channel is subscribed where the mode puts it: sharded, SSUBSCRIBEd on the lock's master;
 * classic, SUBSCRIBEd on the client's home node, which hears every node's PUBLISH. */
static void wake_one(rlock_client *h, rlock_client *w, rlock_kind kind, const char *name,
                     int sharded)
{
    wake_scene sc;
    scene_start(&sc, h, w, kind, name);
    rh_server *where = sharded ? tc_cluster_owner(name) : NULL;
    int64_t until = rh_now_ms() + 10000;
    while (rh_now_ms() < until &&
           (sharded ? channels_of(where, name, 1) < 1 : rlk_pubsub_channel_count(w->pubsub) < 1)) {
        rh_sleep_ms(10);
    }
    scene_release_wakes(&sc);
}

/* Every lock kind on each of the three masters, in mode mode. */
static void wake_all_kinds(int mode, int sharded, const char *prefix)
{
    rlock_client *h = ps_client(mode);
    rlock_client *w = ps_client(mode);
    rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    for (int i = 0; i < 3; i++) {
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            char p[32];
            char name[64];
            snprintf(p, sizeof(p), "%s%d-", prefix, (int)kinds[k]);
            tc_cluster_name_on(i, p, name, sizeof(name));
            wake_one(h, w, kinds[k], name, sharded);
        }
    }
    rlock_client_free(w);
    rlock_client_free(h);
}

static void test_sharded_waiters_woken(void **state)
{
    (void)state;
    wake_all_kinds(RLOCK_CLUSTER_PUBSUB_SHARDED, 1, "shw");
}

static void test_classic_waiters_woken(void **state)
{
    (void)state;
    wake_all_kinds(RLOCK_CLUSTER_PUBSUB_CLASSIC, 0, "clw");
}

/* Waits up to 10 s until master s lists a shard channel of name; 1 if it did. */
static int wait_shard_channel(rh_server *s, const char *name, long long want)
{
    int64_t until = rh_now_ms() + 10000;
    while (channels_of(s, name, 1) != want && rh_now_ms() < until) {
        rh_sleep_ms(10);
    }
    return channels_of(s, name, 1) == want;
}

/* A slot migrated while a sharded waiter waits: the old owner drops the waiter's subscriptions
 * ("sunsubscribe"), the subscriber reads the map again and subscribes on the new owner, and the
 * release there (the holder follows MOVED) wakes the waiter by a message. */
static void test_sharded_waiter_follows_slot(void **state)
{
    (void)state;
    const char *name = "moving-lock";
    rlock_client *h = ps_client(RLOCK_CLUSTER_PUBSUB_SHARDED);
    rlock_client *w = ps_client(RLOCK_CLUSTER_PUBSUB_SHARDED);
    wake_scene sc;
    scene_start(&sc, h, w, RLOCK_REENTRANT, name);
    rh_server *src = tc_cluster_owner(name);
    rh_server *dst = tc_cluster_other_master(src);
    /* Redisson's channel and this client's wake channel. */
    assert_true(wait_shard_channel(src, name, 2));
    tc_cluster_move_slot(name, dst);
    assert_true(wait_shard_channel(dst, name, 2));
    assert_int_equal(channels_of(src, name, 1), 0);
    scene_release_wakes(&sc);
    rlock_client_free(w);
    rlock_client_free(h);
}

/* A sharded client whose map names the wrong master for a slot: its SSUBSCRIBE there is answered
 * MOVED, which is no refusal: the subscriber reads the map again and subscribes on the owner,
 * whose confirmation wakes the waiter (not an RLOCK_EREDIS failure). */
static void test_ssubscribe_moved_follows(void **state)
{
    (void)state;
    rlock_client *w = ps_client(RLOCK_CLUSTER_PUBSUB_SHARDED);
    char name[64];
    char channel[96];
    tc_cluster_name_on(1, "redirected-", name, sizeof(name));
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    rh_server *owner = tc_cluster_owner(name);
    rh_server *other = tc_cluster_other_master(owner);
    rlk_cluster_note_moved(w->cluster, rlk_cluster_key_slot(name, strlen(name)), "127.0.0.1",
                           rh_port(other));
    rlk_cluster_stats before;
    rlk_cluster_get_stats(w->cluster, &before);
    rlk_sub *sub = NULL;
    assert_int_equal(rlk_sub_join(w->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(w->pubsub, sub, 10000, NULL), RLK_WAIT_WOKEN);
    assert_int_equal(channels_of(owner, name, 1), 1);
    assert_int_equal(channels_of(other, name, 1), 0);
    rlk_cluster_stats after;
    rlk_cluster_get_stats(w->cluster, &after);
    assert_true(after.refreshes > before.refreshes);
    rlk_sub_leave(w->pubsub, sub);
    rlock_client_free(w);
}

/* The subscriber's connection to a master is killed (CLIENT KILL TYPE pubsub) while a sharded
 * waiter waits there: the node's entries are subscribed again on a new connection, and the
 * release still wakes the waiter by a message. */
static void test_sharded_node_connection_lost(void **state)
{
    (void)state;
    char name[64];
    tc_cluster_name_on(2, "killed-", name, sizeof(name));
    rlock_client *h = ps_client(RLOCK_CLUSTER_PUBSUB_SHARDED);
    rlock_client *w = ps_client(RLOCK_CLUSTER_PUBSUB_SHARDED);
    wake_scene sc;
    scene_start(&sc, h, w, RLOCK_FAIR, name);
    rh_server *owner = tc_cluster_owner(name);
    assert_true(wait_shard_channel(owner, name, 1));
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
    assert_true(rh_cmd_int(owner, kill) >= 1);
    /* Gone with the connection, then back on a new one. */
    int64_t until = rh_now_ms() + 10000;
    while (!rlk_pubsub_connected(w->pubsub) && rh_now_ms() < until) {
        rh_sleep_ms(10);
    }
    assert_true(wait_shard_channel(owner, name, 1));
    scene_release_wakes(&sc);
    rlock_client_free(w);
    rlock_client_free(h);
}

TC_MAIN(tc_cluster_setup, tc_cluster_teardown, cmocka_unit_test(test_option_checked),
        cmocka_unit_test(test_mode_chosen), cmocka_unit_test(test_sharded_release_spublishes),
        cmocka_unit_test(test_classic_release_publishes),
        cmocka_unit_test(test_sharded_waiters_woken), cmocka_unit_test(test_classic_waiters_woken),
        cmocka_unit_test(test_sharded_waiter_follows_slot),
        cmocka_unit_test(test_ssubscribe_moved_follows),
        cmocka_unit_test(test_sharded_node_connection_lost))
