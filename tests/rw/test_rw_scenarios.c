/*
 * The read-write lock against a real redis-server: Redisson's RedissonReadWriteLockTest scenarios
 * (multi-read, write reentrancy, downgrade, no upgrade, readers woken by a write release, lease
 * expiry windows, #1110, TTL under the watchdog, many readers past the watchdog timeout, force
 * unlock of each side, hash-tag names), fencing tokens, a waiting writer that gives up, and bad
 * input. Timing assertions are behaviour windows, not benchmarks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "rw_util.h"
#include "tc_thread.h"

static rh_server *g_srv;
static rlock_client *g_cli;  /* default options (watchdog 30 s) */
static rlock_client *g_fast; /* watchdog 1500 ms */
static int g_seq;

/* A fresh lock name per call, so that tests never see each other's keys. */
static const char *fresh_name(const char *base)
{
    static char buf[128];

    snprintf(buf, sizeof(buf), "rw:%s:%d", base, ++g_seq);
    return buf;
}

/* The read and write sides of one lock on one client, and worker threads (started, at most
 * three) to hold it as other threads: what most scenarios begin with. */
typedef struct scene {
    const char *name;
    rlock *r, *w;
    rw_worker wk[3];
    int workers;
} scene;

static void scene_open(scene *sc, rlock_client *c, const char *name, int workers)
{
    sc->name = name;
    sc->r = tc_open(c, RLOCK_READ, name);
    sc->w = tc_open(c, RLOCK_WRITE, name);
    sc->workers = workers;
    for (int i = 0; i < workers; i++) {
        rw_worker_start(&sc->wk[i]);
    }
}

/* Declares the scene sc of a test (scene_open() with the remaining arguments) and the short
 * names that scenarios use: name, r (the read side) and w (the write side). */
#define SCENE(sc, ...)                                                                             \
    scene sc;                                                                                      \
    scene_open(&(sc), __VA_ARGS__);                                                                \
    const char *name = (sc).name;                                                                  \
    rlock *r = (sc).r, *w = (sc).w;                                                                \
    (void)name

static void scene_close(scene *sc)
{
    for (int i = 0; i < sc->workers; i++) {
        rw_worker_stop(&sc->wk[i]);
    }
    rlock_free(sc->r);
    rlock_free(sc->w);
}

static int group_setup(void **state)
{
    (void)state;
    if (tc_fixture_open(&g_srv, &g_cli, rw_pool) != 0) {
        return -1;
    }
    g_fast = rw_client(g_srv, 1500, 0, 0);
    return g_fast != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rlock_client_free(g_fast);
    return tc_fixture_close(&g_srv, &g_cli);
}

/* testMultiRead: two readers coexist; a writer is blocked until both are gone. */
static void test_multi_read(void **state)
{
    SCENE(sc, g_cli, fresh_name("multiread"), 3);
    rw_worker *a = &sc.wk[0], *b = &sc.wk[1], *c = &sc.wk[2];

    (void)state;
    assert_int_equal(rw_worker_do(a, RW_OP_TRY, r, 0, -1), RLOCK_OK);
    assert_int_equal(rw_worker_do(b, RW_OP_TRY, r, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_is_locked(r), 1);
    assert_int_equal(rlock_is_locked(w), 0);
    assert_int_equal(rw_worker_do(c, RW_OP_TRY, w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rw_worker_do(a, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rw_worker_do(c, RW_OP_TRY, w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rw_worker_do(b, RW_OP_HELD, r, 0, 0), 1);
    assert_int_equal(rw_worker_do(b, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rw_worker_do(c, RW_OP_TRY, w, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_is_locked(w), 1);
    assert_int_equal(rlock_is_locked(r), 0);
    assert_int_equal(rw_worker_do(c, RW_OP_UNLOCK, w, 0, 0), RLOCK_OK);
    assert_int_equal(rw_exists(g_srv, name), 0);
    scene_close(&sc);
}

/* testWriteLock (first half): the write side is reentrant and excludes readers and writers. */
static void test_write_reentrancy(void **state)
{
    SCENE(sc, g_cli, fresh_name("wreentrant"), 1);
    rw_worker *other = &sc.wk[0];

    (void)state;
    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    /* testReadLockIsLocked: the read side is not locked while only the write side is. */
    assert_int_equal(rlock_is_locked(r), 0);
    assert_int_equal(rlock_try_lock(w, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_hold_count(w), 2);
    assert_int_equal(rlock_hold_count(r), 0);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, r, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rw_worker_do(other, RW_OP_HELD, w, 0, 0), 0);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rlock_hold_count(w), 1);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, r, 100, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rlock_is_locked(w), 0);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, r, 0, -1), RLOCK_OK);
    assert_int_equal(rw_worker_do(other, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    scene_close(&sc);
}

/* testWR / testWriteReadReentrancy / testWriteLock (second half): the writer may read; after its
 * write release it still reads (mode read), others may read, and its write request fails at once
 * (no upgrade). */
static void test_downgrade(void **state)
{
    SCENE(sc, g_cli, fresh_name("downgrade"), 1);
    rw_worker *other = &sc.wk[0];
    char *mode;
    int64_t t0;

    (void)state;
    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    assert_int_equal(rlock_is_locked(r), 1);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, r, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    mode = rw_hget(g_srv, name, "mode");
    assert_non_null(mode);
    assert_string_equal(mode, "read");
    free(mode);
    assert_true(rw_pttl(g_srv, name) > 20000);
    assert_int_equal(rlock_is_held(r), 1);
    assert_int_equal(rlock_is_locked(w), 0);
    assert_int_equal(rw_worker_do(other, RW_OP_TRY, r, 0, -1), RLOCK_OK);
    t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(w, 5000, -1), RLOCK_EDEADLK);
    assert_true(rh_now_ms() - t0 < 1000);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    assert_int_equal(rw_worker_do(other, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rlock_try_lock(w, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rw_exists(g_srv, name), 0);
    scene_close(&sc);
}

/* A reader asking for the write side gets RLOCK_EDEADLK at once from lock() and try_lock(), and
 * leaves no trace in the waiting-writers zset. */
static void test_no_upgrade(void **state)
{
    SCENE(sc, g_cli, fresh_name("noupgrade"), 0);
    char writers[160];
    int64_t t0;

    (void)state;
    snprintf(writers, sizeof(writers), "rlock_rwlock_writers:{%s}", name);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    t0 = rh_now_ms();
    assert_int_equal(rlock_lock(w, -1), RLOCK_EDEADLK);
    assert_int_equal(rlock_try_lock(w, RLOCK_WAIT_FOREVER, 10000), RLOCK_EDEADLK);
    assert_true(rh_now_ms() - t0 < 1000);
    assert_non_null(strstr(rlock_last_error(), "upgrade"));
    assert_int_equal(rw_exists(g_srv, writers), 0);
    assert_int_equal(rlock_hold_count(w), 0);
    assert_int_equal(rlock_hold_count(r), 1);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    scene_close(&sc);
}

/* testWriteRead: 20 readers queued behind a writer all proceed within 1 s of the write release.
 * With downgrade = 1 the writer also reads and its write release turns the lock into a read lock;
 * the readers must still be woken (Redisson publishes nothing there: they would sleep until their
 * TTL bound, the 30 s watchdog lease). */
static void run_write_release_wakes(int downgrade)
{
    SCENE(sc, g_cli, fresh_name(downgrade ? "wakedown" : "wakeall"), 0);
    tc_holder args[20];
    int64_t released;

    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    if (downgrade) {
        assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    }
    for (int i = 0; i < 20; i++) {
        tc_holder_start(&args[i], r, 10000, -1, 20);
    }
    rh_sleep_ms(500);
    released = rh_now_ms();
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(tc_holder_join(&args[i]), RLOCK_OK);
        assert_true(args[i].got_at >= released);
        assert_true(args[i].got_at - released < 1000);
    }
    if (downgrade) {
        assert_int_equal(rlock_unlock(r), RLOCK_OK);
    }
    assert_int_equal(rw_exists(g_srv, name), 0);
    scene_close(&sc);
}

static void test_write_release_wakes_readers(void **state)
{
    (void)state;
    run_write_release_wakes(0);
}

static void test_downgrade_wakes_readers(void **state)
{
    (void)state;
    run_write_release_wakes(1);
}

/* Read lease accounting (testReadLockExpiration, #2144): the hash lives as long as the longest
 * read hold, whatever order the leases come in; a released hold no longer counts. */
static void test_read_lease_windows(void **state)
{
    SCENE(sc, g_cli, fresh_name("leases"), 2);
    rw_worker *a = &sc.wk[0], *b = &sc.wk[1];
    int64_t t0, el;

    (void)state;
    /* A later, shorter lease does not shrink the lock: the writer waits for the 2 s hold. */
    t0 = rh_now_ms();
    assert_int_equal(rw_worker_do(a, RW_OP_TRY, r, 0, 2000), RLOCK_OK);
    assert_int_equal(rw_worker_do(b, RW_OP_TRY, r, 0, 500), RLOCK_OK);
    assert_int_equal(rlock_try_lock(w, 5000, 10000), RLOCK_OK);
    el = rh_now_ms() - t0;
    assert_true(el >= 1900 && el <= 2600);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    /* Leases ran out while held: the late unlocks fail (the holds are gone). */
    assert_int_equal(rw_worker_do(a, RW_OP_UNLOCK, r, 0, 0), RLOCK_ELOST);
    assert_int_equal(rw_worker_do(b, RW_OP_UNLOCK, r, 0, 0), RLOCK_ELOST);

    /* Releasing the long hold recomputes the TTL from the remaining short one. */
    assert_int_equal(rw_worker_do(a, RW_OP_TRY, r, 0, 5000), RLOCK_OK);
    t0 = rh_now_ms();
    assert_int_equal(rw_worker_do(b, RW_OP_TRY, r, 0, 1000), RLOCK_OK);
    rh_sleep_ms(200);
    assert_int_equal(rw_worker_do(a, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_true(rw_pttl(g_srv, name) <= 1000);
    assert_int_equal(rlock_try_lock(w, 5000, 10000), RLOCK_OK);
    el = rh_now_ms() - t0;
    assert_true(el >= 850 && el <= 1600);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    scene_close(&sc);
}

/* testExpireRead / testExpireWrite: a hold with a 1 s lease that is never released lets another
 * thread in after about 1 s; the late unlock is an error, not a success. */
static void test_expire_each_side(void **state)
{
    (void)state;
    for (int side = 0; side < 2; side++) {
        const char *name = fresh_name("expire");
        rlock *held = tc_open(g_cli, side ? RLOCK_WRITE : RLOCK_READ, name);
        rlock *w = tc_open(g_cli, RLOCK_WRITE, name);
        rw_worker other;
        int64_t t0, el;
        int rc;

        rw_worker_start(&other);
        t0 = rh_now_ms();
        assert_int_equal(rlock_try_lock(held, 0, 1000), RLOCK_OK);
        assert_int_equal(rw_worker_do(&other, RW_OP_TRY, w, 5000, -1), RLOCK_OK);
        el = rh_now_ms() - t0;
        assert_true(el >= 900 && el <= 1400);
        rc = rlock_unlock(held);
        assert_true(rc == RLOCK_ELOST);
        assert_int_equal(rw_worker_do(&other, RW_OP_HELD, w, 0, 0), 1);
        assert_int_equal(rw_worker_do(&other, RW_OP_UNLOCK, w, 0, 0), RLOCK_OK);
        rw_worker_stop(&other);
        rlock_free(held);
        rlock_free(w);
    }
}

/* testWriteLockExpiration (#1110): a reentrant write hold with a shorter lease keeps the longer
 * TTL of the first hold. */
static void test_reentrant_write_shorter_lease(void **state)
{
    const char *name = fresh_name("w1110");
    rlock *w = tc_open(g_cli, RLOCK_WRITE, name);
    rw_worker other;

    (void)state;
    rw_worker_start(&other);
    assert_int_equal(rlock_try_lock(w, 0, 3000), RLOCK_OK);
    assert_int_equal(rlock_try_lock(w, 0, 300), RLOCK_OK);
    rh_sleep_ms(800);
    assert_true(rw_pttl(g_srv, name) > 1500);
    assert_int_equal(rlock_is_locked(w), 1);
    assert_int_equal(rw_worker_do(&other, RW_OP_TRY, w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rw_exists(g_srv, name), 0);
    rw_worker_stop(&other);
    rlock_free(w);
}

/* testReadWriteTTL with a 1.5 s watchdog: write + read held without leases stay alive for many
 * watchdog periods, and so does the read side after the write release. */
static void test_ttl_under_watchdog(void **state)
{
    SCENE(sc, g_fast, fresh_name("wdttl"), 0);
    char key[200];

    (void)state;
    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    for (int i = 0; i < 20; i++) {
        rh_sleep_ms(200);
        assert_true(rw_pttl(g_srv, name) > 400);
    }
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    rh_sleep_ms(100);
    assert_int_equal(rlock_is_locked(w), 0);
    for (int i = 0; i < 15; i++) {
        rh_sleep_ms(200);
        assert_true(rw_pttl(g_srv, name) > 400);
    }
    assert_int_equal(rlock_is_held(r), 1);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    assert_int_equal(rw_exists(g_srv, name), 0);
    snprintf(key, sizeof(key), "rlock_rwlock_writers:{%s}", name);
    assert_int_equal(rw_exists(g_srv, key), 0);
    scene_close(&sc);
}

typedef struct many_arg {
    rlock *r;
    pthread_barrier_t *bar;
    int lock_rc, unlock_rc;
} many_arg;

static void *many_reader_main(void *p)
{
    many_arg *a = p;

    a->lock_rc = rlock_lock(a->r, -1);
    pthread_barrier_wait(a->bar);
    rh_sleep_ms(2500);
    a->unlock_rc = rlock_unlock(a->r);
    return NULL;
}

/* testReadLockExpirationRenewal: 50 readers hold past the watchdog timeout (1.5 s + 1 s) and all
 * unlock without error; the lock is gone afterwards. */
static void test_many_readers_past_watchdog(void **state)
{
    const char *name = fresh_name("many");
    rlock *r = tc_open(g_fast, RLOCK_READ, name);
    pthread_barrier_t bar;
    many_arg args[50];
    pthread_t th[50];

    (void)state;
    pthread_barrier_init(&bar, NULL, 51);
    for (int i = 0; i < 50; i++) {
        args[i].r = r;
        args[i].bar = &bar;
        pthread_create(&th[i], NULL, many_reader_main, &args[i]);
    }
    pthread_barrier_wait(&bar);
    assert_int_equal(rlock_is_locked(r), 1);
    for (int i = 0; i < 50; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].lock_rc, RLOCK_OK);
        assert_int_equal(args[i].unlock_rc, RLOCK_OK);
    }
    pthread_barrier_destroy(&bar);
    assert_int_equal(rw_exists(g_srv, name), 0);
    rlock_free(r);
}

/* testForceUnlock: forcing one side leaves the other mode alone; forcing the held side frees the
 * lock and wakes a waiting writer at once. */
static void test_force_unlock(void **state)
{
    SCENE(sc, g_cli, fresh_name("force"), 1);
    rw_worker *other = &sc.wk[0];
    int64_t t0;

    (void)state;
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    assert_int_equal(rlock_force_unlock(w), 0);
    assert_int_equal(rlock_is_locked(r), 1);
    rw_worker_post(other, RW_OP_TRY, w, 10000, -1);
    rh_sleep_ms(300);
    t0 = rh_now_ms();
    assert_int_equal(rlock_force_unlock(r), 1);
    assert_int_equal(rw_worker_result(other), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 1000);
    assert_int_equal(rlock_force_unlock(r), 0);
    assert_int_equal(rlock_is_locked(w), 1);
    assert_int_equal(rlock_force_unlock(w), 1);
    assert_int_equal(rlock_is_locked(w), 0);
    assert_int_equal(rw_exists(g_srv, name), 0);
    /* Holds removed by a force unlock are lost to their owners, and say so once. */
    assert_int_equal(rw_worker_do(other, RW_OP_UNLOCK, w, 0, 0), RLOCK_ELOST);
    assert_int_equal(rlock_unlock(r), RLOCK_ELOST);
    assert_int_equal(rlock_unlock(r), RLOCK_ENOTOWNER);
    scene_close(&sc);
}

typedef struct tag_arg {
    rlock *r, *w;
    rh_server *srv;
    int errors;
} tag_arg;

/* Each thread uses its own admin connection: the harness' cached one is not shared across
 * threads (the write lock orders these commands, but only through Redis). */
static void *tag_main(void *p)
{
    tag_arg *a = p;
    redisContext *ctx = rh_connect(a->srv);

    if (ctx == NULL) {
        a->errors++;
        return NULL;
    }
    for (int i = 0; i < 10; i++) {
        rlock *l = (i % 2) ? a->w : a->r;
        redisReply *rep;

        if (rlock_lock(l, -1) != RLOCK_OK) {
            a->errors++;
            continue;
        }
        if (l == a->w) {
            /* Inside the write lock nobody else may be inside it. */
            rep = redisCommand(ctx, "INCR rw:tag:inside");
            if (rep == NULL || rep->type != REDIS_REPLY_INTEGER || rep->integer != 1) {
                a->errors++;
            }
            if (rep != NULL) {
                freeReplyObject(rep);
            }
            rep = redisCommand(ctx, "DECR rw:tag:inside");
            if (rep != NULL) {
                freeReplyObject(rep);
            }
        }
        if (rlock_unlock(l) != RLOCK_OK) {
            a->errors++;
        }
    }
    redisFree(ctx);
    return NULL;
}

/* Counts the channels with subscribers matching pattern. */
static long long count_channels(const char *pattern)
{
    const char *argv[] = {"PUBSUB", "CHANNELS", pattern, NULL};
    return tc_array_len(g_srv, argv);
}

/* testName: a name with its own hash tag; derived keys and channels use that tag (Redisson's
 * suffixName/prefixName): the read hold's timeout key, the waiting writer's zset and private
 * channel, the readers' channel. Then 10 threads x 10 mixed lock/unlock run cleanly. */
static void test_hash_tag_name(void **state)
{
    SCENE(sc, g_cli, "{test}:abc:key", 2);
    rw_worker *writer = &sc.wk[0], *reader = &sc.wk[1];
    const char *keys[] = {"KEYS", "{test}:abc:key:*:rwlock_timeout:1", NULL};
    redisReply *rep;
    tag_arg args[10];
    pthread_t th[10];

    (void)state;
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    rep = rh_cmd(g_srv, keys);
    assert_non_null(rep);
    assert_int_equal(rep->elements, 1);
    freeReplyObject(rep);
    rw_worker_post(writer, RW_OP_TRY, w, 10000, -1);
    rh_sleep_ms(300);
    assert_int_equal(count_channels("rlock_rwlock_writer:{test}:abc:key:*:write"), 1);
    assert_int_equal(rw_exists(g_srv, "rlock_rwlock_writers:{test}:abc:key"), 1);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    assert_int_equal(rw_worker_result(writer), RLOCK_OK);
    rw_worker_post(reader, RW_OP_TRY, r, 10000, -1);
    rh_sleep_ms(300);
    assert_int_equal(count_channels("redisson_rwlock:{test}:abc:key"), 1);
    assert_int_equal(rw_worker_do(writer, RW_OP_UNLOCK, w, 0, 0), RLOCK_OK);
    assert_int_equal(rw_worker_result(reader), RLOCK_OK);
    assert_int_equal(rw_worker_do(reader, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    for (int i = 0; i < 10; i++) {
        args[i] = (tag_arg){r, w, g_srv, 0};
        pthread_create(&th[i], NULL, tag_main, &args[i]);
    }
    for (int i = 0; i < 10; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].errors, 0);
    }
    assert_int_equal(rw_exists(g_srv, name), 0);
    scene_close(&sc);
}

/* Fencing tokens: write grants from free strictly increase; re-entry keeps the token; a read
 * grant returns the counter's current value. */
static void test_tokens(void **state)
{
    SCENE(sc, g_cli, fresh_name("tokens"), 0);
    uint64_t last = 0;

    (void)state;
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    assert_int_equal(rlock_token(r), 0);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    for (int i = 0; i < 5; i++) {
        uint64_t t;

        assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
        t = rlock_token(w);
        assert_true(t > last);
        assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
        assert_int_equal(rlock_token(w), t);
        assert_int_equal(rlock_unlock(w), RLOCK_OK);
        assert_int_equal(rlock_unlock(w), RLOCK_OK);
        last = t;
    }
    assert_int_equal(rlock_token(w), 0);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    assert_int_equal(rlock_token(r), last);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    scene_close(&sc);
}

/* A writer that gives up leaves the waiting-writers zset and wakes the readers queued behind
 * it at once (they would otherwise wait for its liveness deadline). */
static void test_writer_gives_up(void **state)
{
    SCENE(sc, g_cli, fresh_name("giveup"), 2);
    rw_worker *wr = &sc.wk[0], *rd = &sc.wk[1];
    char writers[160];
    int64_t t0, el;

    (void)state;
    snprintf(writers, sizeof(writers), "rlock_rwlock_writers:{%s}", name);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    rw_worker_post(wr, RW_OP_TRY, w, 1000, -1);
    rh_sleep_ms(200);
    assert_int_equal(rw_exists(g_srv, writers), 1);
    rw_worker_post(rd, RW_OP_TRY, r, 5000, -1);
    assert_int_equal(rw_worker_result(wr), RLOCK_ETIMEDOUT);
    t0 = rh_now_ms();
    assert_int_equal(rw_worker_result(rd), RLOCK_OK);
    el = rh_now_ms() - t0;
    assert_true(el < 400);
    assert_int_equal(rw_exists(g_srv, writers), 0);
    assert_int_equal(rw_worker_do(rd, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    scene_close(&sc);
}

/* Writer preference, deterministically: while a writer waits, a new reader stays out (default),
 * but passes in a reader-preferring client (Redisson's behaviour); a reader re-entering its own
 * hold always passes. */
static void test_waiting_writer_blocks_new_readers(void **state)
{
    rlock_client *pref = rw_client(g_srv, 0, 1, 0);
    rw_worker holder, writer, late;

    (void)state;
    assert_non_null(pref);
    rw_worker_start(&holder);
    rw_worker_start(&writer);
    rw_worker_start(&late);
    for (int reader_preferring = 0; reader_preferring < 2; reader_preferring++) {
        rlock_client *c = reader_preferring ? pref : g_cli;
        const char *name = fresh_name(reader_preferring ? "prefreaders" : "prefwriters");
        rlock *r = tc_open(c, RLOCK_READ, name);
        rlock *w = tc_open(c, RLOCK_WRITE, name);

        assert_int_equal(rw_worker_do(&holder, RW_OP_TRY, r, 0, -1), RLOCK_OK);
        rw_worker_post(&writer, RW_OP_TRY, w, 1500, -1);
        rh_sleep_ms(300);
        assert_int_equal(rw_worker_do(&late, RW_OP_TRY, r, 0, -1),
                         reader_preferring ? RLOCK_OK : RLOCK_ETIMEDOUT);
        assert_int_equal(rw_worker_do(&holder, RW_OP_TRY, r, 0, -1), RLOCK_OK);
        assert_int_equal(rw_worker_do(&holder, RW_OP_COUNT, r, 0, 0), 2);
        assert_int_equal(rw_worker_do(&holder, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
        if (reader_preferring) {
            assert_int_equal(rw_worker_do(&late, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
        }
        assert_int_equal(rw_worker_do(&holder, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
        assert_int_equal(rw_worker_result(&writer), RLOCK_OK);
        assert_int_equal(rw_worker_do(&writer, RW_OP_UNLOCK, w, 0, 0), RLOCK_OK);
        rlock_free(r);
        rlock_free(w);
    }
    rw_worker_stop(&holder);
    rw_worker_stop(&writer);
    rw_worker_stop(&late);
    rlock_client_free(pref);
}

/* The data on Redis is Redisson's byte for byte: hash fields "mode", "<uuid>:<tid>" and
 * "<uuid>:<tid>:write", the read hold's timeout key, and the fencing counter. */
static void test_redisson_layout(void **state)
{
    SCENE(sc, g_cli, fresh_name("layout"), 0);
    const char *hkeys[] = {"HKEYS", name, NULL};
    char owner[128] = "", key[300], *v;
    redisReply *rep;

    (void)state;
    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(r, 5000), RLOCK_OK);
    rep = rh_cmd(g_srv, hkeys);
    assert_non_null(rep);
    assert_int_equal(rep->elements, 3);
    for (size_t i = 0; i < rep->elements; i++) {
        const char *f = rep->element[i]->str;
        size_t len = strlen(f);

        if (strcmp(f, "mode") != 0 && (len < 6 || strcmp(f + len - 6, ":write") != 0)) {
            snprintf(owner, sizeof(owner), "%s", f);
        }
    }
    freeReplyObject(rep);
    /* "<36-char uuid>:<thread id>" */
    assert_true(strlen(owner) > 37 && owner[36] == ':' && owner[8] == '-');
    v = rw_hget(g_srv, name, "mode");
    assert_string_equal(v, "write");
    free(v);
    snprintf(key, sizeof(key), "%s:write", owner);
    v = rw_hget(g_srv, name, key);
    assert_string_equal(v, "1");
    free(v);
    v = rw_hget(g_srv, name, owner);
    assert_string_equal(v, "1");
    free(v);
    snprintf(key, sizeof(key), "{%s}:%s:rwlock_timeout:1", name, owner);
    assert_true(rw_pttl(g_srv, key) > 4000);
    snprintf(key, sizeof(key), "redisson_lock_token:{%s}", name);
    assert_true(rw_redis_int(g_srv, "GET", key) == (long long)rlock_token(w));
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    scene_close(&sc);
}

/* Bad input on both sides: unlock twice, unlock by a non-owner, unlock of the side not held,
 * invalid durations. */
static void test_bad_input(void **state)
{
    SCENE(sc, g_cli, fresh_name("bad"), 1);
    rw_worker *other = &sc.wk[0];

    (void)state;
    assert_int_equal(rlock_unlock(r), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_unlock(w), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_try_lock(r, -5, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_lock(w, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    assert_int_equal(rw_worker_do(other, RW_OP_UNLOCK, r, 0, 0), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_unlock(w), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    assert_int_equal(rlock_unlock(r), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_lock(w, -1), RLOCK_OK);
    assert_int_equal(rw_worker_do(other, RW_OP_UNLOCK, w, 0, 0), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_unlock(r), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_locked(w), 1);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(rlock_unlock(w), RLOCK_ENOTOWNER);
    assert_int_equal(rw_exists(g_srv, name), 0);
    scene_close(&sc);
}

TC_MAIN(group_setup, group_teardown, cmocka_unit_test(test_multi_read),
        cmocka_unit_test(test_write_reentrancy), cmocka_unit_test(test_downgrade),
        cmocka_unit_test(test_no_upgrade), cmocka_unit_test(test_write_release_wakes_readers),
        cmocka_unit_test(test_downgrade_wakes_readers), cmocka_unit_test(test_read_lease_windows),
        cmocka_unit_test(test_expire_each_side),
        cmocka_unit_test(test_reentrant_write_shorter_lease),
        cmocka_unit_test(test_ttl_under_watchdog),
        cmocka_unit_test(test_many_readers_past_watchdog), cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_hash_tag_name), cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_writer_gives_up),
        cmocka_unit_test(test_waiting_writer_blocks_new_readers),
        cmocka_unit_test(test_redisson_layout), cmocka_unit_test(test_bad_input))
