/*
 * Interop with Redisson: a raw hiredis client runs Redisson's own semaphore, permit-expirable
 * semaphore and latch scripts (the Lua text copied as test data from redisson/redisson HEAD
 * 66863978b4a9: RedissonSemaphore.java, RedissonPermitExpirableSemaphore.java,
 * RedissonCountDownLatch.java; Apache License 2.0) with Redisson's KEYS and ARGV, against the
 * same keys as rlock. Each side sees the other's permits and counts, wakes the other's waiters,
 * and the ids of leased permits are interchangeable (16 raw bytes in Redis, hex outside).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_thread.h"

/* RedissonSemaphore.tryAcquireAsync0: KEYS [name]; ARGV [permits]. */
static const char *const rs_try_acquire =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "local val = redis.call('decrby', KEYS[1], ARGV[1]); "
    "return 1; "
    "end; "
    "return 0;";
/* RedissonSemaphore.releaseAsync: KEYS [name, channel]; ARGV [permits, publishCommand]. */
static const char *const rs_release = "local value = redis.call('incrby', KEYS[1], ARGV[1]); "
                                      "redis.call(ARGV[2], KEYS[2], value); ";
/* RedissonSemaphore.trySetPermitsAsync: KEYS [name, channel]; ARGV [permits, publishCommand]. */
static const char *const rs_try_set = "local value = redis.call('get', KEYS[1]); "
                                      "if (value == false) then "
                                      "redis.call('set', KEYS[1], ARGV[1]); "
                                      "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
                                      "return 1;"
                                      "end;"
                                      "return 0;";
/* RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate): KEYS [name, timeout,
 * channel]; ARGV [n, expiry, now, NON_EXPIRABLE, publishCommand, id_1 .. id_n]. */
static const char *const pes_try_acquire =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[5], KEYS[3], value); "
    "end;"
    "end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do "
    "redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); "
    "end; "
    "local ttl = redis.call('pttl', KEYS[1]); "
    "if ttl > 0 then "
    "redis.call('pexpire', KEYS[2], ttl); "
    "end; "
    "return 'OK'; "
    "end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then "
    "return ':' .. tostring(v[2]); "
    "end "
    "return nil;";
/* RedissonPermitExpirableSemaphore.tryReleaseAsync(id): KEYS [name, channel, timeout];
 * ARGV [id, 1, now, publishCommand]. */
static const char *const pes_try_release = "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
                                           "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
                                           "if tonumber(removed) ~= 1 then "
                                           "return 0;"
                                           "end;"
                                           "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
                                           "redis.call(ARGV[4], KEYS[2], value); "
                                           "if tonumber(expire) <= tonumber(ARGV[3]) then "
                                           "return 0;"
                                           "end;"
                                           "return 1;";
/* RedissonCountDownLatch.countDownAsync: KEYS [name, channel]; ARGV [0, publishCommand]. */
static const char *const latch_count_down =
    "local v = redis.call('decr', KEYS[1]);"
    "if v <= 0 then redis.call('del', KEYS[1]) end;"
    "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";
/* RedissonCountDownLatch.trySetCountAsync: KEYS [name, channel]; ARGV [1, count, publish]. */
static const char *const latch_try_set = "if redis.call('exists', KEYS[1]) == 0 then "
                                         "redis.call('set', KEYS[1], ARGV[2]); "
                                         "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
                                         "return 1 "
                                         "else "
                                         "return 0 "
                                         "end";

#define SEM      "compat:sem"
#define SEM_CH   "redisson_sc:{" SEM "}"
#define SEM_TO   "{" SEM "}:timeout"
#define LATCH    "compat:latch"
#define LATCH_CH ("redisson_countdownlatch__channel__{" LATCH "}")

static rh_server *g_srv;
static rlock_client *g_c;
static redisContext *g_peer; /* the Redisson peer */

TC_FIXTURE_RAW(g_srv, g_c, g_peer)

static long long epoch_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* EVAL script with nkeys keys followed by args (binary-safe: lens may be NULL for C strings). */
static redisReply *peer_eval(const char *script, int nkeys, int argc, const char **argv,
                             const size_t *lens)
{
    const char *v[16];
    size_t l[16];
    char nk[8];
    snprintf(nk, sizeof(nk), "%d", nkeys);
    v[0] = "EVAL";
    v[1] = script;
    v[2] = nk;
    for (int i = 0; i < argc; i++) {
        v[3 + i] = argv[i];
        l[3 + i] = lens != NULL && lens[i] != 0 ? lens[i] : strlen(argv[i]);
    }
    l[0] = 4;
    l[1] = strlen(script);
    l[2] = strlen(nk);
    redisReply *r = redisCommandArgv(g_peer, 3 + argc, v, l);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR) {
        print_message("peer script error: %s\n", r->str);
    }
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    return r;
}

static long long peer_int(const char *script, int nkeys, int argc, const char **argv)
{
    redisReply *r = peer_eval(script, nkeys, argc, argv, NULL);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -999;
    freeReplyObject(r);
    return v;
}

static int acquire_one(void *sem)
{
    return rlock_semaphore_acquire(sem, 1, 20000);
}

/* A Redisson subscriber: its own connection subscribed to channel. */
static redisContext *peer_subscribe(const char *channel)
{
    redisContext *sub = rh_connect(g_srv);
    assert_non_null(sub);
    redisReply *r = redisCommand(sub, "SUBSCRIBE %s", channel);
    assert_non_null(r);
    freeReplyObject(r);
    return sub;
}

/* The next message's payload on sub (copied into buf). */
static void peer_message(redisContext *sub, char *buf, size_t cap)
{
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_string_equal(r->element[0]->str, "message");
    snprintf(buf, cap, "%s", r->element[2]->str);
    freeReplyObject(r);
}

static void test_plain_semaphore(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, SEM);
    const char *set[] = {SEM, SEM_CH, "2", "PUBLISH"};
    assert_int_equal(peer_int(rs_try_set, 2, 4, set), 1);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 5), 0); /* Redisson set it */
    assert_int_equal(rlock_semaphore_available(s), 2);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_OK);
    const char *take[] = {SEM, "1"};
    assert_int_equal(peer_int(rs_try_acquire, 1, 2, take), 1);
    assert_int_equal(peer_int(rs_try_acquire, 1, 2, take), 0); /* rlock + Redisson hold both */
    /* Redisson's release wakes an rlock waiter. */
    tc_bg w;
    tc_bg_start(&w, acquire_one, s);
    rh_sleep_ms(200);
    assert_int_equal(w.result, TC_BG_RUNNING);
    int64_t t0 = rh_now_ms();
    const char *rel[] = {SEM, SEM_CH, "1", "PUBLISH"};
    redisReply *r = peer_eval(rs_release, 2, 4, rel, NULL);
    freeReplyObject(r);
    assert_int_equal(tc_bg_join(&w), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 10000);
    /* rlock's release wakes a Redisson subscriber with a numeric message (LongCodec), which
     * is a wake-up bound >= 1. */
    redisContext *sub = peer_subscribe(SEM_CH);
    assert_int_equal(rlock_semaphore_release(s, 2), RLOCK_OK);
    char msg[32];
    peer_message(sub, msg, sizeof(msg));
    char *end = NULL;
    long long n = strtoll(msg, &end, 10);
    assert_true(*end == '\0' && n >= 1 && n <= 2);
    assert_int_equal(peer_int(rs_try_acquire, 1, 2, take), 1); /* rlock's permits for Redisson */
    redisFree(sub);
    rlock_semaphore_free(s);
}

static void hex_to_bin(const char *hex, unsigned char bin[16])
{
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        bin[i] = (unsigned char)v;
    }
}

static void test_permit_expirable_semaphore(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "compat:pes");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    /* Redisson takes a leased permit; rlock releases it by its hex id. */
    const char *hex = "00112233445566778899aabbccddeeff";
    unsigned char bin[16];
    hex_to_bin(hex, bin);
    char now[24], expiry[24];
    snprintf(now, sizeof(now), "%lld", epoch_ms());
    snprintf(expiry, sizeof(expiry), "%lld", epoch_ms() + 60000);
    const char *acq[] = {"compat:pes",
                         "{compat:pes}:timeout",
                         "redisson_sc:{compat:pes}",
                         "1",
                         expiry,
                         now,
                         "922337203685477",
                         "PUBLISH",
                         (const char *)bin};
    size_t lens[] = {0, 0, 0, 0, 0, 0, 0, 0, 16};
    redisReply *r = peer_eval(pes_try_acquire, 3, 9, acq, lens);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "OK");
    freeReplyObject(r);
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(rlock_semaphore_release_leased(s, hex), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2);
    /* rlock takes leased permits (expiring and watchdog); Redisson releases one by its bytes. */
    char id[RLOCK_PERMIT_ID_LEN + 1], wid[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, wid), RLOCK_OK);
    /* Redisson's acquire sees none left and returns the earliest expiry as its hint. */
    snprintf(now, sizeof(now), "%lld", epoch_ms());
    hex_to_bin("ffeeddccbbaa99887766554433221100", bin);
    r = peer_eval(pes_try_acquire, 3, 9, acq, lens);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(r->str[0], ':');
    freeReplyObject(r);
    hex_to_bin(id, bin);
    snprintf(now, sizeof(now), "%lld", epoch_ms());
    const char *rel[] = {"compat:pes",
                         "redisson_sc:{compat:pes}",
                         "{compat:pes}:timeout",
                         (const char *)bin,
                         "1",
                         now,
                         "PUBLISH"};
    size_t rlens[] = {0, 0, 0, 16, 0, 0, 0};
    r = peer_eval(pes_try_release, 3, 7, rel, rlens);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_semaphore_release_leased(s, wid), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 2);
    rlock_semaphore_free(s);
}

static int await_latch(void *latch)
{
    return rlock_latch_await(latch, 20000);
}

static void test_latch(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(g_c, LATCH);
    const char *set[] = {LATCH, LATCH_CH, "1", "2", "PUBLISH"};
    assert_int_equal(peer_int(latch_try_set, 2, 5, set), 1);
    assert_int_equal(rlock_latch_try_set_count(l, 5), 0);
    assert_int_equal(rlock_latch_count(l), 2);
    /* Redisson's count-downs release an rlock awaiter. */
    tc_bg w;
    tc_bg_start(&w, await_latch, l);
    const char *down[] = {LATCH, LATCH_CH, "0", "PUBLISH"};
    redisReply *r = peer_eval(latch_count_down, 2, 4, down, NULL);
    freeReplyObject(r);
    rh_sleep_ms(200);
    assert_int_equal(w.result, TC_BG_RUNNING);
    int64_t t0 = rh_now_ms();
    r = peer_eval(latch_count_down, 2, 4, down, NULL);
    freeReplyObject(r);
    assert_int_equal(tc_bg_join(&w), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 10000);
    /* rlock's set and count-down reach a Redisson subscriber as "1" (new count) then "0". */
    redisContext *sub = peer_subscribe(LATCH_CH);
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    assert_int_equal(peer_int(latch_try_set, 2, 5, set), 0);
    char msg[32];
    peer_message(sub, msg, sizeof(msg));
    assert_string_equal(msg, "1");
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    peer_message(sub, msg, sizeof(msg));
    assert_string_equal(msg, "0");
    const char *exists[] = {"EXISTS", LATCH, NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 0); /* Redisson's getCount: nil = 0 */
    redisFree(sub);
    rlock_latch_free(l);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_plain_semaphore),
        cmocka_unit_test(test_permit_expirable_semaphore), cmocka_unit_test(test_latch))
