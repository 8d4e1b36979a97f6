/*
 * Replica-synced grants on a loop client (libuv adapter): a master with one replica started by
 * the harness. A reentrant grant is on the replica when done runs with RLOCK_OK; with the replica
 * stopped (SIGSTOP) a wait-0 lock completes RLOCK_EREPLICA with nothing left on the master, a
 * waiting lock waits on and gets the lock once the replica is resumed, and an unlock completes
 * RLOCK_OK; a fair lock, a read or write side, a semaphore acquire and a latch count-down short of
 * acknowledgements are RLOCK_EREPLICA (the grant and permits, plain and leased, given back), a
 * semaphore release still succeeds; a watchdog hold outlives the stopped replica; an unlock
 * answered "not held" by a master whose replica does not acknowledge is RLOCK_EREPLICA and the
 * hold stays; a write grant whose give-back fails ends the operation with that failure, not
 * re-entered; with replica_sync = 0 the master sees no WAIT (INFO commandstats).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_replicas.h"
#include "tc_thread.h"
#include "tl_common.h"
#include "tl_loop.h"

#define SYNC_MS 150

static rh_server *g_master;
static rh_server *g_rep[1];

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    return tc_replicated_start(&g_master, g_rep, 1);
}

static int teardown(void **state)
{
    (void)state;
    return tc_replicated_stop(&g_master, g_rep, 1);
}

static rlock_client *loop_client(tu_loop *l, int sync)
{
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = sync;
    o.replica_sync_timeout_ms = SYNC_MS;
    return tl_client(l, &o);
}

static long long exists(rh_server *s, const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(s, argv);
}

static void resume_replica(void)
{
    assert_int_equal(rh_resume(g_rep[0]), 0);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
}

static void resume_cb(void *arg)
{
    (void)arg;
    assert_int_equal(rh_resume(g_rep[0]), 0);
}

/* A grant is on the replica when done runs, and its release too. */
static void test_grant_on_replica(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-grant");
    assert_non_null(lk);
    assert_int_equal(rh_reset_stats(g_master), 0);
    for (int i = 0; i < 3; i++) {
        tl_lock_now(l, lk, o, 10000);
        assert_int_equal(exists(g_rep[0], "lr-grant"), 1);
        tl_unlock_now(l, lk, o, RLOCK_OK);
        assert_int_equal(exists(g_rep[0], "lr-grant"), 0);
    }
    assert_true(rh_cmdstat_calls(g_master, "wait") >= 6);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* With the replica stopped: a wait-0 lock gives its grant back; an unlock still succeeds. */
static void test_replica_stopped(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-stop"),
          *held = rlock_open(c, RLOCK_REENTRANT, "lr-held");
    assert_true(lk != NULL && held != NULL);
    tl_lock_now(l, held, o, 10000);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lk, o, 0, 10000, NULL, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_EREPLICA);
    assert_true(d.at_ms - t0 >= SYNC_MS - 50);
    assert_int_equal(exists(g_master, "lr-stop"), 0);
    tl_unlock_now(l, held, o, RLOCK_OK);
    assert_int_equal(exists(g_master, "lr-held"), 0);
    resume_replica();
    rlock_free(lk);
    rlock_free(held);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

static long long get_int(rh_server *s, const char *key)
{
    const char *argv[] = {"GET", key, NULL};
    char *v = rh_cmd_str(s, argv);
    long long n = v != NULL ? atoll(v) : -1;
    free(v);
    return n;
}

/* With the replica stopped: a fair, read and write wait-0 lock gives its grant back, a
 * semaphore acquire its permit, a latch count-down is RLOCK_EREPLICA, a semaphore release still
 * succeeds. */
static void test_sync_types_stopped(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *fair = rlock_open(c, RLOCK_FAIR, "lr-fair");
    rlock_semaphore *sem = rlock_semaphore_open(c, "lr-sem");
    rlock_latch *lt = rlock_latch_open(c, "lr-latch");
    rlock_options to;
    tc_options(&to, g_master);
    rlock_client *t = tc_client(&to); /* a loop client makes no blocking calls */
    rlock_semaphore *tsem = rlock_semaphore_open(t, "lr-sem");
    rlock_latch *tlt = rlock_latch_open(t, "lr-latch");
    assert_true(fair != NULL && sem != NULL && lt != NULL && tsem != NULL && tlt != NULL);
    assert_int_equal(rlock_semaphore_try_set_permits(tsem, 2), 1);
    rlock_semaphore *tl0 = rlock_semaphore_open(t, "lr-lsem");
    assert_int_equal(rlock_semaphore_try_set_permits(tl0, 1), 1);
    rlock_semaphore_free(tl0);
    assert_int_equal(rlock_latch_try_set_count(tlt, 2), 1);
    tl_done s1 = {0};
    s1.inside = 1;
    assert_int_equal(rlock_semaphore_acquire_async(sem, 1, 0, NULL, tl_sem_done, &s1), RLOCK_OK);
    s1.inside = 0;
    tl_wait_done(l, &s1, RLOCK_OK);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_done f = {0}, s2 = {0}, cd = {0}, rel = {0};
    assert_int_equal(tl_lock_async(fair, o, 0, 10000, NULL, &f), RLOCK_OK);
    tl_wait_done(l, &f, RLOCK_EREPLICA);
    assert_int_equal(exists(g_master, "lr-fair"), 0);
    /* The read and write sides give their grants back too, with their own release scripts
     * (a spin lock's is the reentrant lock's, whose give-back is above). */
    for (int kind = RLOCK_READ; kind <= RLOCK_WRITE; kind++) {
        rlock *lk = rlock_open(c, (rlock_kind)kind, "lr-rw");
        assert_non_null(lk);
        tl_done g = {0};
        assert_int_equal(tl_lock_async(lk, o, 0, 10000, NULL, &g), RLOCK_OK);
        tl_wait_done(l, &g, RLOCK_EREPLICA);
        assert_int_equal(exists(g_master, "lr-rw"), 0);
        rlock_free(lk);
    }
    assert_int_equal(rlock_semaphore_acquire_async(sem, 1, 0, NULL, tl_sem_done, &s2), RLOCK_OK);
    tl_wait_done(l, &s2, RLOCK_EREPLICA);
    assert_int_equal(get_int(g_master, "lr-sem"), 1);
    assert_int_equal(rlock_latch_count_down_async(lt, tl_latch_done, &cd), RLOCK_OK);
    tl_wait_done(l, &cd, RLOCK_EREPLICA);
    /* A leased permit acquire gives its permit back too. */
    rlock_semaphore *lsem = rlock_semaphore_open(c, "lr-lsem");
    rlock_semaphore *tlsem = rlock_semaphore_open(t, "lr-lsem");
    assert_true(lsem != NULL && tlsem != NULL);
    tl_done ld = {0};
    assert_int_equal(rlock_semaphore_acquire_leased_async(lsem, 0, 5000, NULL, tl_leased_done, &ld),
                     RLOCK_OK);
    tl_wait_done(l, &ld, RLOCK_EREPLICA);
    assert_int_equal(rlock_semaphore_acquired(tlsem), 0);
    rlock_semaphore_free(lsem);
    rlock_semaphore_free(tlsem);
    assert_int_equal(rlock_semaphore_release_async(sem, 1, tl_sem_done, &rel), RLOCK_OK);
    tl_wait_done(l, &rel, RLOCK_OK);
    assert_int_equal(get_int(g_master, "lr-sem"), 2);
    resume_replica();
    rlock_free(fair);
    rlock_semaphore_free(sem);
    rlock_latch_free(lt);
    rlock_semaphore_free(tsem);
    rlock_latch_free(tlt);
    rlock_client_free(t);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A watchdog hold outlives a stopped replica (its renewals fall short) and is still held, and
 * renewed, after the resume. */
static void test_watchdog_outlives(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options opt;
    tc_options(&opt, g_master);
    opt.replica_sync_timeout_ms = 100;
    opt.watchdog_timeout_ms = 450;
    rlock_client *c = tl_client(l, &opt);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-wd");
    assert_non_null(lk);
    assert_int_equal(tl_lock_once(l, lk, o, 0, NULL), RLOCK_OK);
    assert_int_equal(rh_reset_stats(g_master), 0);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_run_for(l, 700); /* longer than the lease: only renewals kept it */
    assert_int_equal(exists(g_master, "lr-wd"), 1);
    assert_true(rh_cmdstat_calls(g_master, "wait") >= 2); /* the renewals were synced */
    resume_replica();
    tl_run_for(l, 500);
    assert_int_equal(exists(g_master, "lr-wd"), 1);
    assert_int_equal(exists(g_rep[0], "lr-wd"), 1);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A waiting lock whose grants the stopped replica misses waits on, and gets the lock once the
 * replica is back. */
static void test_waiter_waits_on(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-wait");
    assert_non_null(lk);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lk, o, 4000, 10000, NULL, &d), RLOCK_OK);
    tu_after(l, 500, resume_cb, NULL);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(d.at_ms - t0 >= 450);
    assert_int_equal(exists(g_rep[0], "lr-wait"), 1);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* An unlock that a node whose replicas do not acknowledge answers "not held" is not believed
 * (as a master restarted empty says so of a hold the promoted replica keeps): RLOCK_EREPLICA, and
 * the hold stays recorded. Here the master's key is deleted while the replica, cut off, keeps it;
 * after a failover to that replica the retried unlock releases the hold. */
static void test_unlock_not_held_unsynced(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-gone");
    assert_non_null(lk);
    tl_lock_now(l, lk, o, 20000);
    assert_int_equal(tc_replicaof(g_rep[0], NULL), 0);
    const char *del[] = {"DEL", "lr-gone", NULL};
    assert_int_equal(rh_cmd_int(g_master, del), 1);
    tl_unlock_now(l, lk, o, RLOCK_EREPLICA);
    assert_int_equal(tc_roll_back_to(g_master, g_rep[0]), 0);
    assert_int_equal(exists(g_master, "lr-gone"), 1);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    assert_int_equal(exists(g_master, "lr-gone"), 0);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* Resumes the replica a second after it was stopped, from a thread of its own (a loop timer
 * set while the test thread was blocked would count from the loop's stale clock). */
static int resume_later(void *arg)
{
    (void)arg;
    rh_sleep_ms(1000);
    return rh_resume(g_rep[0]);
}

/* A write grant the replica did not acknowledge whose give-back fails (an ACL user that may not
 * touch the lock's channel key, which the write lock's release names) ends the operation with
 * that error: the grant may stand, and it is not re-entered. Before, the wait attempted again
 * after the give-back and re-entered the grant once per round until the replica came back, then
 * completed RLOCK_OK with Redis counting more holds than the owner's one. */
static void test_give_back_failed(void **state)
{
    (void)state;
    const char *user[] = {"ACL",
                          "SETUSER",
                          "lgb",
                          "reset",
                          "on",
                          ">lgb-pw",
                          "+@all",
                          "&*",
                          "~lr-gbw",
                          "~{lr-gbw}*",
                          "~redisson_lock_token:*",
                          "~rlock_rwlock_*",
                          NULL};
    char *ok = rh_cmd_str(g_master, user);
    assert_non_null(ok);
    free(ok);
    rlock_options opts;
    tc_options(&opts, g_master);
    opts.replica_sync = 0; /* the holder's unlock does not wait for the stopped replica */
    rlock_client *hc = tc_client(&opts);
    rlock *h = tc_open(hc, RLOCK_WRITE, "lr-gbw");
    assert_int_equal(rlock_try_lock(h, 0, 20000), RLOCK_OK);
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    char url[256];
    snprintf(url, sizeof(url), "redis://lgb:lgb-pw@127.0.0.1:%d", rh_port(g_master));
    opts.url = url;
    opts.replica_sync = 1;
    opts.replica_sync_timeout_ms = SYNC_MS;
    rlock_client *c = tl_client(l, &opts);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_WRITE, "lr-gbw");
    assert_non_null(lk);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, o, 8000, 20000, NULL, &d), RLOCK_OK);
    tl_run_for(l, 300); /* busy: the waiter is recorded */
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tc_bg resumer;
    tc_bg_start(&resumer, resume_later, NULL);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    print_message("write grant whose give-back failed: %d (%s)\n", d.rc, d.msg);
    assert_int_equal(tc_bg_join(&resumer), 0);
    char field[128];
    snprintf(field, sizeof(field), "%s:write", rlock_owner_id(o));
    const char *hget[] = {"HGET", "lr-gbw", field, NULL};
    assert_int_equal(d.rc, RLOCK_EREDIS);
    assert_non_null(strstr(d.msg, "NOPERM"));
    char *count = rh_cmd_str(g_master, hget);
    assert_non_null(count);
    assert_string_equal(count, "1"); /* the one grant, not re-entered */
    free(count);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
    assert_int_equal(rlock_force_unlock(h), 1);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
    tc_close_own(h, hc);
}

/* replica_sync = 0: no WAIT reaches the master. */
static void test_no_sync(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 0);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-nosync");
    assert_non_null(lk);
    assert_int_equal(rh_reset_stats(g_master), 0);
    tl_lock_now(l, lk, o, 10000);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    assert_int_equal(rh_cmdstat_calls(g_master, "wait"), 0);
    assert_true(rh_cmdstat_calls(g_master, "evalsha") + rh_cmdstat_calls(g_master, "eval") >= 2);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_grant_on_replica),
        cmocka_unit_test(test_replica_stopped), cmocka_unit_test(test_waiter_waits_on),
        cmocka_unit_test(test_sync_types_stopped), cmocka_unit_test(test_watchdog_outlives),
        cmocka_unit_test(test_unlock_not_held_unsynced), cmocka_unit_test(test_give_back_failed),
        cmocka_unit_test(test_no_sync))
