/*
 * Acceptance test of the subscriber against a real redis-server: the server kills the pub/sub
 * connection while four threads wait for a held lock. The subscriber must reconnect and
 * resubscribe so that the release still wakes every waiter in turn, long before their wait time
 * or the holder's lease could have woken them; afterwards no channel is left subscribed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "tc_redis.h"
#include "pubsub.h"

#define WAITERS 4
#define WAIT_MS 10000
#define HOLD_MS 100

typedef struct shared {
    rlock *lock;
    atomic_int started;
    atomic_int inside; /* threads in the critical section: must never exceed 1 */
    atomic_int violations;
    atomic_int warnings; /* WARN log lines (the subscriber reports the lost connection) */
} shared;

typedef struct waiter {
    shared *sh;
    atomic_int result; /* 1 while waiting; read by the main thread during the wait */
    int64_t acquired_at;
} waiter;

static void on_log(int level, const char *msg, void *user)
{
    shared *sh = user;
    if (level == RLOCK_LOG_WARN && strstr(msg, "subscriber") != NULL) {
        atomic_fetch_add(&sh->warnings, 1);
    }
}

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    atomic_fetch_add(&w->sh->started, 1);
    int r = rlock_try_lock(w->sh->lock, WAIT_MS, -1);
    if (r == RLOCK_OK) {
        w->acquired_at = rh_now_ms();
        if (atomic_fetch_add(&w->sh->inside, 1) != 0) {
            atomic_fetch_add(&w->sh->violations, 1);
        }
        rh_sleep_ms(HOLD_MS);
        atomic_fetch_sub(&w->sh->inside, 1);
        r = rlock_unlock(w->sh->lock);
    }
    atomic_store(&w->result, r);
    return NULL;
}

/* The id of the only pub/sub connection on the server, or -1 if there is not exactly one. */
static const char *const pubsub_channels[] = {"PUBSUB", "CHANNELS", NULL};

/* The id of the only pub/sub connection on the server, or -1 if there is not exactly one. */
static long long pubsub_client_id(rh_server *s)
{
    const char *argv[] = {"CLIENT", "LIST", "TYPE", "pubsub", NULL};
    char *list = rh_cmd_str(s, argv);
    long long id = -1;
    const char *p = list != NULL ? strstr(list, "id=") : NULL;
    if (p != NULL && strstr(p + 3, "id=") == NULL) {
        id = strtoll(p + 3, NULL, 10);
    }
    free(list);
    return id;
}

static void test_pubsub_killed_while_waiting(void **state)
{
    rh_server *s = *state;
    shared sh = {0};
    rlock_options o;
    cu_opts(&o, s);
    o.log_fn = on_log;
    o.user_data = &sh;
    rlock_client *c = tc_client(&o);
    sh.lock = rlock_open(c, RLOCK_REENTRANT, "ps-lock");
    const char *channel = "redisson_lock__channel:{ps-lock}";
    /* Held with the watchdog: its 30 s lease is far longer than the waiters' 10 s wait, so a
     * waiter can only get the lock in time through a pub/sub wake-up. */
    assert_int_equal(rlock_lock(sh.lock, -1), RLOCK_OK);

    pthread_t th[WAITERS];
    waiter w[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i].sh = &sh;
        atomic_init(&w[i].result, 1);
        assert_int_equal(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
    }
    while (atomic_load(&sh.started) < WAITERS) {
        rh_sleep_ms(5);
    }
    assert_true(tc_wait_listeners(s, channel, 1, 2000));
    /* Give every waiter time to join the (already live) channel and go to sleep. */
    rh_sleep_ms(200);
    /* Redisson's channel and rlock's wake channel of the lock (lock_reentrant.c). */
    assert_int_equal(rlk_pubsub_channel_count(c->pubsub), 2);

    long long old_id = pubsub_client_id(s);
    assert_true(old_id > 0);
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
    assert_int_equal(rh_cmd_int(s, kill), 1);
    int64_t killed_at = rh_now_ms();
    /* The subscriber notices, reconnects and subscribes again by itself: a new connection. */
    assert_true(tc_wait_listeners(s, channel, 1, 1000));
    long long new_id = pubsub_client_id(s);
    assert_true(new_id > 0);
    assert_true(new_id != old_id);
    int64_t resubscribed = rh_now_ms() - killed_at;
    rh_sleep_ms(1000 - (rh_now_ms() - killed_at));
    for (int i = 0; i < WAITERS; i++) {
        assert_int_equal(atomic_load(&w[i].result), 1); /* nobody gave up or got in meanwhile */
    }
    int64_t released_at = rh_now_ms();
    assert_int_equal(rlock_unlock(sh.lock), RLOCK_OK);
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(th[i], NULL);
    }
    int64_t last = 0;
    for (int i = 0; i < WAITERS; i++) {
        assert_int_equal(atomic_load(&w[i].result), RLOCK_OK);
        last = w[i].acquired_at > last ? w[i].acquired_at : last;
    }
    print_message("resubscribed %lld ms after the kill; the last of %d waiters got the lock "
                  "%lld ms after the release (each held it %d ms)\n",
                  (long long)resubscribed, WAITERS, (long long)(last - released_at), HOLD_MS);
    assert_int_equal(atomic_load(&sh.violations), 0);
    /* Four hand-offs of HOLD_MS each plus wake-up latency: far below any timeout-driven retry. */
    assert_in_range(last - released_at, (WAITERS - 1) * HOLD_MS, 2000);
    assert_true(atomic_load(&sh.warnings) >= 1);

    /* No waiter left: the client unsubscribes and the server has no channel any more. */
    int64_t deadline = rh_now_ms() + 1000;
    while (tc_array_len(s, pubsub_channels) != 0 && rh_now_ms() < deadline) {
        rh_sleep_ms(10);
    }
    assert_int_equal(tc_array_len(s, pubsub_channels), 0);
    assert_int_equal(rlk_pubsub_channel_count(c->pubsub), 0);
    assert_int_equal(rlock_is_locked(sh.lock), 0);
    rlock_free(sh.lock);
    rlock_client_free(c);
}

/* A channel whose last waiter left lingers, still subscribed: a waiter that comes back finds it
 * live, so the return costs no SUBSCRIBE and no spurious wake-up; a message published while
 * nobody waited is not lost (the next joiner gets one permit for it); and once the linger time
 * has passed the subscriber unsubscribes by itself. */
static void test_channel_lingers(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    /* Long enough that a slow machine (valgrind, TSan) cannot see it run out mid-test. */
    rlk_pubsub_set_linger(c->pubsub, 60000);
    const char *channel = "linger-test";
    const char *publish[] = {"PUBLISH", channel, "0", NULL};
    rlk_sub *sub = NULL;

    /* First wait: SUBSCRIBE, whose confirmation is a permit. */
    assert_int_equal(rlk_sub_join(c->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 5000, NULL), 1);
    rlk_sub_leave(c->pubsub, sub);
    long long subscribes = rh_cmdstat_calls(s, "subscribe");
    assert_true(subscribes >= 1);
    assert_int_equal(rlk_pubsub_channel_count(c->pubsub), 0);
    assert_int_equal(tc_numsub(s, channel), 1);

    /* Coming back: no new SUBSCRIBE and no permit without a message. */
    assert_int_equal(rlk_sub_join(c->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 200, NULL), 0);
    /* A message while waiting wakes as usual. */
    assert_int_equal(rh_cmd_int(s, publish), 1);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 5000, NULL), 1);
    rlk_sub_leave(c->pubsub, sub);

    /* A message read while nobody waits gives the next joiner exactly one permit. */
    uint64_t seen = rlk_pubsub_messages(c->pubsub);
    assert_int_equal(rh_cmd_int(s, publish), 1);
    int64_t deadline = rh_now_ms() + 5000;
    while (rlk_pubsub_messages(c->pubsub) == seen && rh_now_ms() < deadline) {
        rh_sleep_ms(1);
    }
    assert_true(rlk_pubsub_messages(c->pubsub) > seen); /* read before anyone joined */
    assert_int_equal(rlk_sub_join(c->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 5000, NULL), 1);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 200, NULL), 0);
    rlk_sub_leave(c->pubsub, sub);
    assert_int_equal(rh_cmdstat_calls(s, "subscribe"), subscribes);
    assert_int_equal(rh_cmdstat_calls(s, "unsubscribe"), 0);

    /* A short linger: the channel goes away by itself. */
    rlk_pubsub_set_linger(c->pubsub, 50);
    assert_true(tc_wait_numsub(s, channel, 0, 5000));
    assert_int_equal(rh_cmdstat_calls(s, "unsubscribe"), 1);

    /* After that, a new wait subscribes again, as the first one did. */
    assert_int_equal(rlk_sub_join(c->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 5000, NULL), 1);
    assert_int_equal(rh_cmdstat_calls(s, "subscribe"), subscribes + 1);
    rlk_sub_leave(c->pubsub, sub);
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TC_SERVER_TEST(test_pubsub_killed_while_waiting),
        TC_SERVER_TEST(test_channel_lingers),
    };
    return cmocka_run_group_tests(tests, tc_require_server, NULL);
}
