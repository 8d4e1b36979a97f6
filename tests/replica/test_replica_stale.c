/*
 * A failover to a replica that missed a release (issue 26, section 2), on a master with one
 * replica and replica_sync = 1. The replica is cut off (REPLICAOF NO ONE) while it still has the
 * hold, the unlock's WAIT falls short (the unlock returns RLOCK_OK, as documented), and then the
 * master's data is rolled back to the replica's (the master replicates from it once and is made a
 * master again): to the client, a failover to the stale replica. The thread's next lock must give
 * the resurrected hold back and take the lock from free with a new token, not re-enter it (token
 * 0, hold count 2, and a lock left held after its unlock); a partial unlock that a failover undid
 * must not leave a hold behind either. Also: an exclusive lock never reports token 0, even when
 * the thread re-enters through a second handle; and a master that lost a hold without knowing it
 * was replaced (no replica acknowledging) is not believed when it says the hold is gone, neither
 * by an unlock nor by the watchdog, nor by the settle of a grant or release whose reply was lost;
 * an unlock that fails before its release is sent leaves that release to the next lock; and a
 * short grant whose give-back fails is not re-entered by the wait's next attempt.
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

#define SYNC_MS 300

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

static rlock_client *client_synced(void)
{
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = SYNC_MS;
    return tc_client(&o);
}

/* The replica stops replicating and keeps what it has: the holds the master releases next. */
static void cut_off_replica(void)
{
    assert_int_equal(tc_replicaof(g_rep[0], NULL), 0);
}

/* To the client, a failover to the replica that was cut off: the master takes the replica's data
 * (a full sync from it), becomes a master again, and the replica follows it as before. */
static void fail_over_to_stale_replica(void)
{
    assert_int_equal(tc_roll_back_to(g_master, g_rep[0]), 0);
}

static long long field_count(const char *key)
{
    return tc_hash_only_value(g_master, key);
}

static long long exists(const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(g_master, argv);
}

/* Lock, an unlock the replica misses, the failover: the next try_lock takes the lock from free
 * with a larger token, and its unlock leaves the lock free. */
static void check_released_hold_not_reentered(rlock_kind kind, const char *name)
{
    rlock_client *c = client_synced();
    rlock *l = tc_open(c, kind, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    assert_true(t1 > 0);
    cut_off_replica();
    assert_int_equal(rlock_unlock(l), RLOCK_OK); /* released on the master; WAIT fell short */
    assert_int_equal(rlock_token(l), 0);
    fail_over_to_stale_replica();
    assert_int_equal(exists(name), 1); /* the released hold is back */

    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    print_message("%s: token before %llu, after the failover %llu, hold count %d\n", name,
                  (unsigned long long)t1, (unsigned long long)rlock_token(l), rlock_hold_count(l));
    assert_true(rlock_token(l) > t1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    tc_close_own(l, c);
}

static void test_reentrant_released_hold_not_reentered(void **state)
{
    (void)state;
    check_released_hold_not_reentered(RLOCK_REENTRANT, "st:re");
}

static void test_fair_released_hold_not_reentered(void **state)
{
    (void)state;
    check_released_hold_not_reentered(RLOCK_FAIR, "st:fair");
}

static void test_write_released_hold_not_reentered(void **state)
{
    (void)state;
    check_released_hold_not_reentered(RLOCK_WRITE, "st:rw");
}

/* Two holds, one unlock the replica misses, the failover (Redis counts two again): the last
 * unlock must leave the lock free, not one hold that nobody renews or releases. */
static void test_partial_unlock_undone(void **state)
{
    (void)state;
    rlock_client *c = client_synced();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:partial");
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    cut_off_replica();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1); /* one hold left */
    fail_over_to_stale_replica();
    assert_int_equal(field_count("st:partial"), 2);

    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    tc_close_own(l, c);
}

/* The master "loses" the hold without knowing it was replaced (as a killed master restarted
 * empty serves its old slots until the cluster demotes it): its key is deleted while the replica
 * that keeps the hold is cut off, so no replica acknowledges what it answers. */
static void master_loses_hold(const char *name)
{
    cut_off_replica();
    const char *argv[] = {"DEL", name, NULL};
    assert_int_equal(rh_cmd_int(g_master, argv), 1);
}

/* An unlock that such a node answers "not held": its outcome is unknown (RLOCK_EREPLICA), not a
 * lost hold. Once the hold is back (the failover to the replica that kept it), the retried unlock
 * releases it, and the next lock takes the lock from free with a larger token instead of
 * re-entering a hold nobody counts (the same token again, hold count 2). */
static void test_unlock_not_held_unsynced(void **state)
{
    (void)state;
    rlock_client *c = client_synced();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:gone");
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    master_loses_hold("st:gone");
    assert_int_equal(rlock_unlock(l), RLOCK_EREPLICA);
    fail_over_to_stale_replica();
    assert_int_equal(field_count("st:gone"), 1);

    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:gone"), 0);
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    assert_true(rlock_token(l) > t1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    tc_close_own(l, c);
}

/* rlock_extend on a synced client waits for the replicas (RLOCK_EREPLICA when they do not
 * acknowledge), and a "not held" from a node whose replicas do not acknowledge is not believed:
 * the hold stays recorded, and once it is back the extend and the unlock succeed. */
static void test_extend_not_held_unsynced(void **state)
{
    (void)state;
    rlock_client *c = client_synced();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:extend");
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    master_loses_hold("st:extend");
    assert_int_equal(rlock_extend(l, NULL, 30000), RLOCK_EREPLICA);
    assert_non_null(strstr(rlock_last_error(), "0 of 1 replicas acknowledged"));
    fail_over_to_stale_replica();
    assert_int_equal(rlock_extend(l, NULL, 30000), RLOCK_OK);
    assert_true(rlock_remaining_ttl_ms(l) > 20000);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:extend"), 0);
    tc_close_own(l, c);
}

/* A watchdog hold whose renewal such a node answers "gone" is not judged lost while its lease
 * lasts: after the failover to the replica that kept it, renewals go on and the unlock releases
 * it (before: RLOCK_ELOST, and the hold left on Redis for anyone's next lock to trip on). */
static void test_renewal_gone_unsynced(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = SYNC_MS;
    o.watchdog_timeout_ms = 3000; /* renewals every 1 s */
    rlock_client *c = tc_client(&o);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:renew");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    master_loses_hold("st:renew");
    rh_sleep_ms(1300); /* at least one renewal answered "gone" */
    fail_over_to_stale_replica();
    rh_sleep_ms(1300); /* at least one renewal on the hold that came back */
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:renew"), 0);
    tc_close_own(l, c);
}

/* A synced client whose commands give up after 300 ms (for the CLIENT PAUSE cases below). */
static rlock_client *client_synced_short(void)
{
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = SYNC_MS;
    o.command_timeout_ms = 300;
    return tc_client(&o);
}

/* CLIENT PAUSE WRITE (or UNPAUSE with pause NULL) on the master. */
static void pause_writes(int on)
{
    const char *pause[] = {"CLIENT", "PAUSE", "10000", "WRITE", NULL};
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    char *ok = rh_cmd_str(g_master, on ? pause : unpause);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
}

/* A grant whose reply was lost is settled by the next lock; a count of 0 read on a node whose
 * replicas do not acknowledge may be a hold the node lost, so the next lock returns RLOCK_EREPLICA
 * and keeps the mark; once the replica is back the count is believed and the lock is granted. */
static void test_lost_grant_settle_unsynced(void **state)
{
    (void)state;
    rlock_client *c = client_synced_short();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:lostgrant");
    pause_writes(1);
    int r = rlock_try_lock(l, 0, 20000);
    pause_writes(0);
    print_message("lock under CLIENT PAUSE: %d (%s)\n", r, rlock_last_error());
    assert_int_equal(r, RLOCK_ECONN);
    cut_off_replica();
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_EREPLICA);
    assert_int_equal(tc_replicaof(g_rep[0], g_master), 0);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:lostgrant"), 0);
    tc_close_own(l, c);
}

/* A release whose outcome was unknown is settled by the retried unlock; a count below the
 * record's read on a node whose replicas do not acknowledge is not believed (RLOCK_EREPLICA, the
 * record keeps both holds). After the failover to the replica that kept them the retry finds the
 * release never ran and sends it, and one hold is left to release. */
static void test_unknown_release_settle_unsynced(void **state)
{
    (void)state;
    rlock_client *c = client_synced_short();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:unknownrel");
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    pause_writes(1);
    int r = rlock_unlock(l);
    pause_writes(0);
    assert_int_equal(r, RLOCK_ECONN);
    master_loses_hold("st:unknownrel");
    assert_int_equal(rlock_unlock(l), RLOCK_EREPLICA);
    fail_over_to_stale_replica();
    assert_int_equal(field_count("st:unknownrel"), 2);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(field_count("st:unknownrel"), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:unknownrel"), 0);
    tc_close_own(l, c);
}

/* An unlock that fails before its release is sent (the settle of an unacknowledged partial
 * release cannot read the count: CLIENT PAUSE) leaves that release pending, as an unlock with an
 * unknown outcome does: the thread's next lock sends it first and takes the lock from free with
 * a larger token. Before, the next lock re-entered the hold the thread had let go (the same
 * token, hold count 2), and the lock stayed held after the thread's last unlock. */
static void test_unlock_settle_failed(void **state)
{
    (void)state;
    rlock_client *c = client_synced_short();
    rlock *l = tc_open(c, RLOCK_REENTRANT, "st:settlefail");
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    cut_off_replica();
    assert_int_equal(rlock_unlock(l), RLOCK_OK); /* one hold left; its WAIT fell short */
    assert_int_equal(tc_replicaof(g_rep[0], g_master), 0);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
    pause_writes(1);
    int r = rlock_unlock(l);
    pause_writes(0);
    print_message("unlock under CLIENT PAUSE: %d (%s)\n", r, rlock_last_error());
    assert_int_equal(r, RLOCK_ECONN);
    assert_int_equal(field_count("st:settlefail"), 1);

    assert_int_equal(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    print_message("token before %llu, after %llu, hold count %d\n", (unsigned long long)t1,
                  (unsigned long long)rlock_token(l), rlock_hold_count(l));
    assert_true(rlock_token(l) > t1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(field_count("st:settlefail"), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists("st:settlefail"), 0);
    tc_close_own(l, c);
}

/* The holder's side of test_give_back_failed, on a thread of its own: once the waiter is
 * recorded, the replica is cut off and the holder unlocks (the waiter's grant then falls short),
 * and a second later the replica follows the master again (the waiter's next attempt would be
 * acknowledged). 0, or -1 after a message. */
typedef struct give_back_ctx {
    rlock *h;
    rlock_owner *owner; /* the holder: the test thread locked for it */
} give_back_ctx;

static int give_back_holder(void *arg)
{
    give_back_ctx *g = arg;
    const char *zcard[] = {"ZCARD", "rlock_rwlock_writers:{st:gbw}", NULL};
    for (int i = 0; i < 500 && rh_cmd_int(g_master, zcard) != 1; i++) {
        rh_sleep_ms(10);
    }
    if (tc_replicaof(g_rep[0], NULL) != 0 || rlock_unlock_ex(g->h, g->owner) != RLOCK_OK) {
        fprintf(stderr, "holder: %s\n", rlock_last_error());
        return -1;
    }
    rh_sleep_ms(1000);
    if (tc_replicaof(g_rep[0], g_master) != 0 || tc_replicas_wait(g_master, 1, 10000) != 0) {
        return -1;
    }
    return 0;
}

/* A grant the replicas did not acknowledge whose give-back fails (here an ACL user that may not
 * touch the lock's channel key, which every release of the write lock names) may stand: the wait
 * gives it back again before it attempts once more, and the call ends with that failure when it
 * cannot, for the thread's next lock to settle. Before, the wait attempted again at once and the
 * write lock's attempt re-entered the grant it had not given back, once per round, until the
 * replica came back: the call returned RLOCK_OK with Redis counting more holds than the thread,
 * and the lock stayed held after the thread's unlock. */
static void test_give_back_failed(void **state)
{
    (void)state;
    const char *user[] = {"ACL",
                          "SETUSER",
                          "gb",
                          "reset",
                          "on",
                          ">gb-pw",
                          "+@all",
                          "&*",
                          "~st:gbw",
                          "~{st:gbw}*",
                          "~redisson_lock_token:*",
                          "~rlock_rwlock_*",
                          NULL};
    const char *all_keys[] = {"ACL", "SETUSER", "gb", "~*", NULL};
    char *ok = rh_cmd_str(g_master, user);
    assert_non_null(ok);
    free(ok);
    rlock_options o;
    tc_options(&o, g_master);
    rlock_client *hc = tc_client(&o);
    rlock *h = tc_open(hc, RLOCK_WRITE, "st:gbw");
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = SYNC_MS;
    rlock_client *wc = tc_client_as(&o, g_master, "gb", "gb-pw");
    rlock *w = tc_open(wc, RLOCK_WRITE, "st:gbw");
    give_back_ctx g = {h, NULL};
    assert_int_equal(rlock_owner_new(hc, &g.owner), RLOCK_OK);
    rlock_lock_args args;
    rlock_lock_args_init(&args);
    args.wait_ms = 0;
    args.lease_ms = 20000;
    args.owner = g.owner;
    assert_int_equal(rlock_lock_ex(h, &args), RLOCK_OK);
    uint64_t t1 = rlock_token_ex(h, g.owner);

    tc_bg holder;
    tc_bg_start(&holder, give_back_holder, &g);
    int r = rlock_try_lock(w, 10000, 20000);
    print_message("lock whose grant could not be given back: %d (%s)\n", r, rlock_last_error());
    assert_int_equal(tc_bg_join(&holder), 0);
    ok = rh_cmd_str(g_master, all_keys);
    assert_non_null(ok);
    free(ok);
    if (r != RLOCK_OK) {
        r = rlock_try_lock(w, 0, 20000); /* settles the grant first */
    }
    assert_int_equal(r, RLOCK_OK);
    assert_true(rlock_token(w) > t1);
    assert_int_equal(rlock_hold_count(w), 1);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    assert_int_equal(exists("st:gbw"), 0);
    rlock_free(w);
    rlock_client_free(wc);
    rlock_owner_free(g.owner);
    tc_close_own(h, hc);
}

/* A thread that holds an exclusive lock through one handle and locks it through another: Redis
 * counts a re-entry, and the second handle reports the hold's token, never 0. */
static void test_second_handle_token(void **state)
{
    (void)state;
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_WRITE};
    static const char *const names[] = {"st:two:re", "st:two:fair", "st:two:rw"};
    rlock_client *c = client_synced();
    for (int i = 0; i < 3; i++) {
        rlock *a = tc_open(c, kinds[i], names[i]);
        rlock *b = tc_open(c, kinds[i], names[i]);
        assert_int_equal(rlock_lock(a, -1), RLOCK_OK);
        assert_int_equal(rlock_try_lock(b, 0, 10000), RLOCK_OK);
        print_message("%s: tokens %llu and %llu\n", names[i], (unsigned long long)rlock_token(a),
                      (unsigned long long)rlock_token(b));
        assert_true(rlock_token(a) > 0);
        assert_int_equal(rlock_token(b), rlock_token(a));
        assert_int_equal(rlock_unlock(b), RLOCK_OK);
        assert_int_equal(rlock_unlock(a), RLOCK_OK);
        assert_int_equal(rlock_is_locked(a), 0);
        rlock_free(b);
        rlock_free(a);
    }
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant_released_hold_not_reentered),
        cmocka_unit_test(test_fair_released_hold_not_reentered),
        cmocka_unit_test(test_write_released_hold_not_reentered),
        cmocka_unit_test(test_partial_unlock_undone),
        cmocka_unit_test(test_second_handle_token),
        cmocka_unit_test(test_unlock_not_held_unsynced),
        cmocka_unit_test(test_renewal_gone_unsynced),
        cmocka_unit_test(test_extend_not_held_unsynced),
        cmocka_unit_test(test_lost_grant_settle_unsynced),
        cmocka_unit_test(test_unknown_release_settle_unsynced),
        cmocka_unit_test(test_unlock_settle_failed),
        cmocka_unit_test(test_give_back_failed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
