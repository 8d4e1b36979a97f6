/*
 * Out of memory (maxmemory with noeviction): a holder can always let go. Releases and watchdog
 * renewals of every single-key lock type work while Redis refuses writes that grow memory;
 * acquires fail with RLOCK_EREDIS and Redis' "OOM ..." text. The scripts that do not grow memory
 * carry the Redis 7 shebang flag allow-oom; the acquires carry a plain "#!lua", which makes Redis
 * refuse them up front under OOM instead of after some of their writes. A fair waiter or waiting
 * writer whose wait ends under OOM leaves its queue (the give-up and heartbeat scripts run too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cmocka.h>

#include "core_util.h"
#include "tc_redis.h"
#include "tc_thread.h"

#define WATCHDOG_MS 600

static atomic_int lost_count;

static void on_lost(const char *name, void *user_data)
{
    (void)name;
    (void)user_data;
    atomic_fetch_add(&lost_count, 1);
}

static void set_maxmemory(rh_server *s, const char *bytes)
{
    const char *policy[] = {"CONFIG", "SET", "maxmemory-policy", "noeviction", NULL};
    const char *limit[] = {"CONFIG", "SET", "maxmemory", bytes, NULL};
    char *r = rh_cmd_str(s, policy);
    assert_non_null(r);
    free(r);
    r = rh_cmd_str(s, limit);
    assert_non_null(r);
    free(r);
}

static void check_kind(rh_server *s, rlock_kind kind)
{
    rlock_options o;
    cu_opts(&o, s);
    o.watchdog_timeout_ms = WATCHDOG_MS;
    o.on_lost = on_lost;
    atomic_store(&lost_count, 0);
    rlock_client *c = tc_client(&o);
    rlock *l = tc_open(c, kind, "oom-held");
    rlock *other = tc_open(c, kind, "oom-other");
    /* Two holds under the watchdog, and one with a lease, taken before memory runs out. */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);

    set_maxmemory(s, "1");
    /* A new acquire is refused with Redis' OOM text. */
    int r = rlock_try_lock(other, 0, 10000);
    print_message("kind %d: acquire under OOM -> %d (%s)\n", (int)kind, r, rlock_last_error());
    assert_int_equal(r, RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "OOM"));
    /* Renewals keep the hold alive over several watchdog periods. */
    rh_sleep_ms(3 * WATCHDOG_MS);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(atomic_load(&lost_count), 0);
    /* Both releases work, the last one frees the lock. */
    r = rlock_unlock(l);
    print_message("kind %d: partial release under OOM -> %d (%s)\n", (int)kind, r,
                  r ? rlock_last_error() : "");
    assert_int_equal(r, RLOCK_OK);
    r = rlock_unlock(l);
    print_message("kind %d: last release under OOM -> %d (%s)\n", (int)kind, r,
                  r ? rlock_last_error() : "");
    assert_int_equal(r, RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_force_unlock(l), 0);
    set_maxmemory(s, "0");

    assert_int_equal(rlock_try_lock(other, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(other), RLOCK_OK);
    rlock_free(other);
    rlock_free(l);
    rlock_client_free(c);
}

/* The waiter's call; its rlock_last_error() is printed from its own thread. */
static int giveup_wait(void *arg)
{
    int r = rlock_try_lock(arg, 20000, 10000);
    print_message("wait under OOM -> %d (%s)\n", r, r ? rlock_last_error() : "");
    return r;
}

/* A queued waiter (fair waiter, waiting writer) whose wait ends under OOM (its next attempt is
 * refused) has left the queue when the call returns: the give-up script runs under OOM, and so
 * do the heartbeats that keep it queued until then. queue_len counts the queue on the server. */
static void check_giveup(rh_server *s, rlock_kind kind, const char *const *queue_len)
{
    rlock_options o;
    cu_opts(&o, s);
    o.watchdog_timeout_ms = WATCHDOG_MS;
    o.waiter_timeout_ms = WATCHDOG_MS;
    rlock_client *c = tc_client(&o);
    rlock_client *c2 = tc_client(&o);
    rlock *l = tc_open(c, kind, "oom-queue");
    rlock *w = tc_open(c2, kind, "oom-queue");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, giveup_wait, w);
    for (int i = 0; i < 2000 && rh_cmd_int(s, queue_len) != 1; i++) {
        rh_sleep_ms(5);
    }
    assert_int_equal(rh_cmd_int(s, queue_len), 1);

    set_maxmemory(s, "1");
    assert_int_equal(tc_bg_join(&bg), RLOCK_EREDIS);
    assert_int_equal(rh_cmd_int(s, queue_len), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    set_maxmemory(s, "0");
    rlock_free(w);
    rlock_free(l);
    rlock_client_free(c2);
    rlock_client_free(c);
}

static void test_fair_giveup(void **state)
{
    const char *zcard[] = {"ZCARD", "redisson_lock_timeout:{oom-queue}", NULL};
    check_giveup(*state, RLOCK_FAIR, zcard);
}

static void test_writer_giveup(void **state)
{
    const char *zcard[] = {"ZCARD", "rlock_rwlock_writers:{oom-queue}", NULL};
    check_giveup(*state, RLOCK_WRITE, zcard);
}

int main(void)
{
    const struct CMUnitTest giveups[] = {
        TC_SERVER_TEST(test_fair_giveup),
        TC_SERVER_TEST(test_writer_giveup),
    };
    int failed = tc_run_per_kind("tests", check_kind, NULL);
    return failed + cmocka_run_group_tests(giveups, NULL, NULL);
}
