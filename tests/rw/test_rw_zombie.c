/*
 * Dead processes must not block a read-write lock for long (real redis-server, real processes
 * killed with SIGKILL):
 *  - a dead reader next to a live one: the live reader's renewals do not keep the dead reader's
 *    timeout key alive (Redisson #7098), and when the live reader leaves the lock is free at once
 *    (read unlock recomputes the TTL from live holds only; Redisson's zombie cleanup test);
 *  - a dead reader alone: a writer gets in when the dead reader's lease (1.5 s watchdog) ends;
 *  - a dead waiting writer: its liveness deadline stops being refreshed, so readers held back
 *    behind it get in within waiter_timeout_ms (1 s), while a live waiting writer keeps them out
 *    for longer than that (its heartbeat works);
 *  - Redis restarted empty under held read and write holds (RedissonLockExpirationRenewalTest):
 *    the holds are reported lost (on_lost, RLOCK_ELOST on unlock), and holds taken afterwards are
 *    renewed again for several watchdog periods.
 * Children are fresh processes (rh_spawn_self) that take the lock and then sleep until killed.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "rw_util.h"

static rh_server *g_srv;
static rlock_client *g_cli; /* watchdog 1500 ms, waiter timeout 1000 ms */

TC_FIXTURE(g_srv, g_cli, rw_pool_fast_liveness)

/* Child: "--child read|write URL NAME": takes that side (watchdog lease) and sleeps. */
static int child_main(const char *side, const char *url, const char *name)
{
    rlock_client *c = rw_client_url(url, 1500, 0, 1000);
    rlock *l;

    if (c == NULL) {
        return 2;
    }
    l = rlock_open(c, strcmp(side, "write") == 0 ? RLOCK_WRITE : RLOCK_READ, name);
    if (l == NULL || rlock_lock(l, -1) != RLOCK_OK) {
        return 3;
    }
    for (;;) {
        pause();
    }
}

static pid_t spawn_child(const char *side, const char *name)
{
    const char *argv[] = {"self", "--child", side, rh_url(g_srv), name, NULL};
    pid_t pid = rh_spawn_self(argv);

    assert_true(pid > 0);
    return pid;
}

/* Polls cmd key until it returns want (up to 5 s). */
static void await_int(const char *cmd, const char *key, long long want)
{
    int64_t end = rh_now_ms() + 5000;

    while (rw_redis_int(g_srv, cmd, key) != want) {
        if (rh_now_ms() > end) {
            fail_msg("%s %s never became %lld", cmd, key, want);
        }
        rh_sleep_ms(20);
    }
}

static void kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    assert_int_equal(rh_wait_child(pid, 5000), 128 + SIGKILL);
}

static long long count_keys(const char *pattern)
{
    const char *argv[] = {"KEYS", pattern, NULL};
    return tc_array_len(g_srv, argv);
}

static void test_dead_reader_next_to_live_reader(void **state)
{
    const char *name = "rw:zombie:mixed";
    rlock *r = rlock_open(g_cli, RLOCK_READ, name);
    rlock *w = rlock_open(g_cli, RLOCK_WRITE, name);
    rw_worker writer;
    pid_t child;

    (void)state;
    rw_worker_start(&writer);
    assert_int_equal(rlock_lock(r, -1), RLOCK_OK);
    child = spawn_child("read", name);
    await_int("HLEN", name, 3);
    kill_child(child);
    /* Past the dead reader's lease: only the live reader's timeout key may remain. */
    rh_sleep_ms(2500);
    assert_int_equal(count_keys("{rw:zombie:mixed}:*:rwlock_timeout:*"), 1);
    assert_int_equal(rw_redis_int(g_srv, "HLEN", name), 3);
    assert_int_equal(rw_worker_do(&writer, RW_OP_TRY, w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(r), RLOCK_OK);
    /* The dead reader's field is ignored: the lock is gone right away. */
    assert_int_equal(rw_exists(g_srv, name), 0);
    assert_int_equal(rw_worker_do(&writer, RW_OP_TRY, w, 0, -1), RLOCK_OK);
    assert_int_equal(rw_worker_do(&writer, RW_OP_UNLOCK, w, 0, 0), RLOCK_OK);
    rw_worker_stop(&writer);
    rlock_free(r);
    rlock_free(w);
}

static void test_dead_reader_alone(void **state)
{
    const char *name = "rw:zombie:alone";
    rlock *w = rlock_open(g_cli, RLOCK_WRITE, name);
    pid_t child;
    int64_t t_kill, el;

    (void)state;
    child = spawn_child("read", name);
    await_int("HLEN", name, 2);
    t_kill = rh_now_ms();
    kill_child(child);
    assert_int_equal(rlock_try_lock(w, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_try_lock(w, 5000, -1), RLOCK_OK);
    el = rh_now_ms() - t_kill;
    assert_true(el >= 300 && el <= 1900);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    rlock_free(w);
}

static void test_dead_waiting_writer(void **state)
{
    const char *name = "rw:zombie:writer";
    const char *writers = "rlock_rwlock_writers:{rw:zombie:writer}";
    rlock *r = rlock_open(g_cli, RLOCK_READ, name);
    rw_worker holder, late;
    pid_t child;
    int64_t t_kill, el;

    (void)state;
    rw_worker_start(&holder);
    rw_worker_start(&late);
    assert_int_equal(rw_worker_do(&holder, RW_OP_TRY, r, 0, -1), RLOCK_OK);
    child = spawn_child("write", name);
    await_int("ZCARD", writers, 1);
    /* Longer than the waiter timeout: the live writer's heartbeat keeps readers out. */
    rh_sleep_ms(2500);
    assert_int_equal(rw_worker_do(&late, RW_OP_TRY, r, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(rw_worker_do(&late, RW_OP_TRY, r, 300, -1), RLOCK_ETIMEDOUT);
    t_kill = rh_now_ms();
    kill_child(child);
    assert_int_equal(rw_worker_do(&late, RW_OP_TRY, r, 5000, -1), RLOCK_OK);
    el = rh_now_ms() - t_kill;
    assert_true(el >= 300 && el <= 1600);
    assert_int_equal(rw_redis_int(g_srv, "ZCARD", writers), 0);
    assert_int_equal(rw_worker_do(&late, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rw_worker_do(&holder, RW_OP_UNLOCK, r, 0, 0), RLOCK_OK);
    assert_int_equal(rw_exists(g_srv, name), 0);
    rw_worker_stop(&holder);
    rw_worker_stop(&late);
    rlock_free(r);
}

static void count_lost(const char *name, void *user_data)
{
    (void)name;
    atomic_fetch_add((atomic_int *)user_data, 1);
}

static void test_restart_loses_and_renews(void **state)
{
    static atomic_int lost;
    rlock_options o;
    rlock_client *c = NULL;

    (void)state;
    atomic_init(&lost, 0);
    rlock_options_init(&o);
    o.url = rh_url(g_srv);
    o.watchdog_timeout_ms = 1500;
    o.on_lost = count_lost;
    o.user_data = &lost;
    assert_int_equal(rlock_client_new(&o, &c), RLOCK_OK);
    for (int side = 0; side < 2; side++) {
        const char *name = side ? "rw:restart:w" : "rw:restart:r";
        rlock *l = rlock_open(c, side ? RLOCK_WRITE : RLOCK_READ, name);
        int before = atomic_load(&lost);
        int64_t end;

        assert_non_null(l);
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        assert_int_equal(rh_restart(g_srv), 0);
        end = rh_now_ms() + 5000;
        while (atomic_load(&lost) == before && rh_now_ms() < end) {
            rh_sleep_ms(50);
        }
        assert_int_equal(atomic_load(&lost), before + 1);
        assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
        /* After the restart the watchdog renews new holds as before. */
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        rh_sleep_ms(3500);
        assert_int_equal(rlock_is_held(l), 1);
        assert_true(rw_pttl(g_srv, name) > 500);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        assert_int_equal(rw_exists(g_srv, name), 0);
        rlock_free(l);
    }
    rlock_client_free(c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_reader_next_to_live_reader),
        cmocka_unit_test(test_dead_reader_alone),
        cmocka_unit_test(test_dead_waiting_writer),
        cmocka_unit_test(test_restart_loses_and_renews),
    };
    if (argc == 5 && strcmp(argv[1], "--child") == 0) {
        return child_main(argv[2], argv[3], argv[4]);
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
