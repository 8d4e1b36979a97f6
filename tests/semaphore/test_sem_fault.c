/*
 * Leased permits under the watchdog (lease_ms < 0): a holder keeps its permit for 3x the
 * watchdog timeout; after SIGKILL of the holder process the permit comes back within the
 * watchdog timeout + one renewal tick (a waiter wakes on the lease's expiry, as nobody
 * publishes then); a permit removed behind its holder's back is reported through on_lost and
 * its release returns RLOCK_ELOST; a release published while the waiters' subscriber connection
 * is down (Redisson's lost wake-up) does not leave them asleep.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_thread.h"

#define WD_MS 1500 /* watchdog timeout: renewal every 500 ms */

static rh_server *g_srv;

static int64_t epoch_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The holder: takes a watchdog permit, publishes its id on a list, then waits to be killed. */
static int holder_main(void *arg)
{
    (void)arg;
    rlock_client *c = tc_client_ex(g_srv, WD_MS, 0, NULL, NULL);
    rlock_semaphore *s = c ? rlock_semaphore_open(c, "fault:sem") : NULL;
    char id[RLOCK_PERMIT_ID_LEN + 1];
    if (s == NULL || rlock_semaphore_acquire_leased(s, 5000, -1, id) != RLOCK_OK) {
        return 2;
    }
    redisContext *ctx = rh_connect(g_srv);
    redisReply *r = ctx ? redisCommand(ctx, "RPUSH fault:held %s", id) : NULL;
    if (r == NULL) {
        return 2;
    }
    freeReplyObject(r);
    for (;;) {
        pause();
    }
}

static void test_watchdog_permit_survives_and_returns_after_sigkill(void **state)
{
    (void)state;
    g_srv = tc_start();
    const char *set[] = {"SET", "fault:sem", "1", NULL};
    char *ok = rh_cmd_str(g_srv, set);
    free(ok);
    pid_t kid = rh_fork_child(holder_main, NULL); /* before this process starts any thread */
    assert_true(kid > 0);
    rlock_client *c = tc_client_ex(g_srv, WD_MS, 0, NULL, NULL);
    rlock_semaphore *s = rlock_semaphore_open(c, "fault:sem");
    redisContext *raw = rh_connect(g_srv);
    redisReply *r = redisCommand(raw, "BLPOP fault:held 10");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    snprintf(id, sizeof(id), "%s", r->element[1]->str);
    freeReplyObject(r);
    unsigned char bin[16];
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(id + 2 * i, "%2x", &v);
        bin[i] = (unsigned char)v;
    }
    /* Held for 3x the watchdog timeout: still held, its expiry still ahead. */
    rh_sleep_ms(3 * WD_MS + 200);
    assert_int_equal(rlock_semaphore_available(s), 0);
    r = redisCommand(raw, "ZSCORE {fault:sem}:timeout %b", bin, (size_t)16);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    int64_t expiry = atoll(r->str);
    freeReplyObject(r);
    assert_true(expiry > epoch_ms());
    assert_true(expiry <= epoch_ms() + WD_MS + 100);
    /* SIGKILL: no release, no renewal. A waiter gets the permit when its lease runs out. */
    assert_int_equal(kill(kid, SIGKILL), 0);
    int64_t t0 = rh_now_ms();
    char mine[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 20000, 5000, mine), RLOCK_OK);
    int64_t took = rh_now_ms() - t0;
    print_message("permit of the killed holder available again %lld ms after SIGKILL "
                  "(watchdog timeout %d ms, tick %d ms)\n",
                  (long long)took, WD_MS, WD_MS / 3);
    assert_true(took <= WD_MS + WD_MS / 3);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_semaphore_release_leased(s, mine), RLOCK_OK);
    assert_int_equal(rh_wait_child(kid, 5000), 128 + SIGKILL);
    redisFree(raw);
    sc_close(s, c);
    rh_free(g_srv);
}

static atomic_int g_lost;
static char g_lost_name[64];

static void on_lost(const char *name, void *user)
{
    (void)user;
    snprintf(g_lost_name, sizeof(g_lost_name), "%s", name);
    atomic_fetch_add(&g_lost, 1);
}

static void test_removed_permit_is_reported_lost(void **state)
{
    (void)state;
    g_srv = tc_start();
    rlock_client *c = tc_client_ex(g_srv, 600, 0, on_lost, NULL);
    rlock_semaphore *s = rlock_semaphore_open(c, "lost:sem");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1], other[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, other), RLOCK_OK);
    const char *zrem_all[] = {"ZREMRANGEBYRANK", "{lost:sem}:timeout", "0", "0", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zrem_all), 1); /* one of the two, behind its back */
    int64_t t0 = rh_now_ms();
    while (atomic_load(&g_lost) == 0 && rh_now_ms() - t0 < 5000) {
        rh_sleep_ms(10);
    }
    assert_int_equal(atomic_load(&g_lost), 1);
    assert_string_equal(g_lost_name, "lost:sem");
    int a = rlock_semaphore_release_leased(s, id);
    int b = rlock_semaphore_release_leased(s, other);
    /* The removed one is lost; the other is still renewed and releases normally. */
    assert_true((a == RLOCK_ELOST && b == RLOCK_OK) || (a == RLOCK_OK && b == RLOCK_ELOST));
    rh_sleep_ms(800);
    assert_int_equal(atomic_load(&g_lost), 1);
    sc_close(s, c);
    rh_free(g_srv);
}

static int acquire_one(void *sem)
{
    return rlock_semaphore_acquire(sem, 1, 30000);
}

static void test_release_during_subscriber_reconnect(void **state)
{
    (void)state;
    enum { N = 3 };
    g_srv = tc_start();
    rlock_client *c = sc_client(g_srv);
    rlock_semaphore *s = rlock_semaphore_open(c, "reconnect:sem");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 0), 1);
    tc_bg w[N];
    for (int i = 0; i < N; i++) {
        tc_bg_start(&w[i], acquire_one, s);
    }
    assert_true(tc_wait_numsub(g_srv, "redisson_sc:{reconnect:sem}", 1, 10000));
    rh_sleep_ms(200); /* every waiter asleep */
    /* Kill the subscriber connection and release in one transaction, so the message is
     * published while nobody is subscribed: it is lost, as in Redisson's reconnect gap. */
    redisContext *raw = rh_connect(g_srv);
    redisAppendCommand(raw, "MULTI");
    redisAppendCommand(raw, "CLIENT KILL TYPE pubsub");
    redisAppendCommand(raw, "INCRBY reconnect:sem 3");
    redisAppendCommand(raw, "PUBLISH redisson_sc:{reconnect:sem} 3");
    redisAppendCommand(raw, "EXEC");
    int64_t killed_at = rh_now_ms();
    redisReply *r = NULL;
    for (int i = 0; i < 5; i++) {
        freeReplyObject(r);
        r = NULL;
        assert_int_equal(redisGetReply(raw, (void **)&r), REDIS_OK);
    }
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_int_equal(r->element[0]->integer, 1); /* the subscriber connection was killed */
    assert_int_equal(r->element[2]->integer, 0); /* and no subscriber received the message */
    freeReplyObject(r);
    redisFree(raw);
    for (int i = 0; i < N; i++) {
        assert_int_equal(tc_bg_join(&w[i]), RLOCK_OK);
        /* The resubscription's confirmation makes every waiter re-attempt; without it they
         * would sleep to their 30 s deadline. */
        assert_true(w[i].done_at - killed_at < 15000);
        print_message("waiter %d acquired %lld ms after the lost release\n", i,
                      (long long)(w[i].done_at - killed_at));
    }
    sc_close(s, c);
    rh_free(g_srv);
}

TC_MAIN(tc_require_server, NULL,
        cmocka_unit_test(test_watchdog_permit_survives_and_returns_after_sigkill),
        cmocka_unit_test(test_removed_permit_is_reported_lost),
        cmocka_unit_test(test_release_during_subscriber_reconnect))
