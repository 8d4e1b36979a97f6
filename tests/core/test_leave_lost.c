/*
 * A waiter whose give-up could not reach Redis (issue 26): its wait is interrupted
 * (rlock_client_interrupt) while the server's writes are paused (CLIENT PAUSE WRITE), and its
 * connections are killed with the leave script pending, so its grant registration stays and the
 * call returns RLOCK_ETIMEDOUT. The holder's release then grants the lock to the departed wait.
 * The same thread's next lock call must not count that grant as a re-entry: it takes one hold
 * (Redis' count 1), and its unlock frees the lock for another client at once. Before the fix the
 * count was 2 and the key stayed held for the whole lease after the unlock. (A wait that runs out
 * ends the same way when its leave fails, but its last attempt runs just before the leave, so a
 * pause cannot single the leave out.)
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
#include "tc_thread.h"

#define CMD_MS   500  /* the waiter's command_timeout_ms */
#define WAIT_MS  1500 /* its try_lock wait */
#define PAUSE_AT 300  /* the pause begins this long after the wait did */
#define STOP_AT  400  /* and the wait is interrupted (its leave script blocks) */
#define KILL_AT  2200 /* past wait_ms + command_timeout_ms: the give-up has failed by then */

typedef struct fault {
    rh_server *s;
    rlock_client *waiter;
} fault;

static void admin(rh_server *s, const char *const *argv)
{
    char *ok = rh_cmd_str(s, argv);
    free(ok);
}

/* Pauses the server's writes from PAUSE_AT, interrupts the waiter at STOP_AT, kills every
 * normal connection at KILL_AT (the waiter's leave script was pending on one), then lets the
 * server write again. */
static int pause_and_kill(void *arg)
{
    fault *f = arg;
    rh_server *s = f->s;
    const char *pause[] = {"CLIENT", "PAUSE", "5000", "WRITE", NULL};
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", NULL};
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    rh_sleep_ms(PAUSE_AT);
    admin(s, pause);
    rh_sleep_ms(STOP_AT - PAUSE_AT);
    rlock_client_interrupt(f->waiter);
    rh_sleep_ms(KILL_AT - STOP_AT);
    admin(s, kill);
    rh_sleep_ms(50);
    admin(s, unpause);
    return 0;
}

static long long key_int(rh_server *s, const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key, NULL};
    return rh_cmd_int(s, argv);
}

static void leave_lost(rh_server *s, rlock_kind kind, const char *name, const char *grants)
{
    rlock_client *h = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock_client *c = tc_client_tuned(s, 0, CMD_MS, NULL, NULL);
    rlock_client *other = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock *hl = tc_open(h, kind, name), *wl = tc_open(c, kind, name),
          *ol = tc_open(other, kind, name);
    /* The holder and the waiter are different clients, so one thread can be both. */
    assert_int_equal(rlock_try_lock(hl, 0, 10000), RLOCK_OK);
    tc_bg bg;
    fault f = {s, c};
    tc_bg_start(&bg, pause_and_kill, &f);
    int rc = rlock_try_lock(wl, WAIT_MS, 10000);
    (void)tc_bg_join(&bg);
    assert_int_equal(rc, RLOCK_ETIMEDOUT);
    /* The call says why its wait ended (rlock.h), not that its give-up failed. */
    assert_non_null(strstr(rlock_last_error(), "interrupted"));
    /* The setup itself: the give-up did not run, the grant registration is still there. */
    assert_int_equal(key_int(s, "HLEN", grants), 1);
    assert_int_equal(rlock_unlock(hl), RLOCK_OK);
    /* The release granted the lock to the departed wait: the waiter's field holds it. */
    assert_int_equal(key_int(s, "EXISTS", name), 1);
    /* A single attempt: the interrupted client waits no more (rlock.h). */
    assert_int_equal(rlock_try_lock(wl, 0, 10000), RLOCK_OK);
    long long count = tc_hash_only_value(s, name);
    assert_int_equal(rlock_unlock(wl), RLOCK_OK);
    long long left = key_int(s, "PTTL", name);
    print_message("%s: Redis' count after the next lock %lld, PTTL after its unlock %lld\n", name,
                  count, left);
    assert_int_equal(count, 1);
    assert_int_equal(left, -2);
    assert_int_equal(rlock_try_lock(ol, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(ol), RLOCK_OK);
    rlock_free(ol);
    rlock_free(wl);
    rlock_free(hl);
    rlock_client_free(other);
    rlock_client_free(c);
    rlock_client_free(h);
}

static void test_reentrant(void **state)
{
    leave_lost(*state, RLOCK_REENTRANT, "ll:re", "rlock_lock_waiters:{ll:re}:grants");
}

static void test_fair(void **state)
{
    leave_lost(*state, RLOCK_FAIR, "ll:fair", "rlock_lock_waiters:{ll:fair}:grants");
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_reentrant), TC_SERVER_TEST(test_fair))
