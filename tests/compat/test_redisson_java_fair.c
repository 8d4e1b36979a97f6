/*
 * Two of the four ways a mixed rlock/Redisson fair queue loses strict order (docs/locks.md,
 * "Mixed queues"), measured with the released Redisson: a Redisson waiter whose JVM dies in the
 * queue, and a Redisson waiter whose wall clock is ahead of the others. Each test prints the
 * inversions it saw; the numbers are in docs/compatibility.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "redisson_java.h"
#include "redisson_java_cases.h"
#include "rlock.h"
#include "tc_redis.h"

/* The dead peer's fairLockWaitTimeout: how long its waiter may block the queue. */
#define DEAD_WAIT_MS 2000
/* The lease of the rlock holder the queue waits behind (it is released before). */
#define HOLD_MS 3000
/* The shifted peer's clock, ahead of the others by more than Redisson's default 300 s wait. */
#define SHIFT "+600"

static rh_server *g_srv;
static rj_peer *g_peer;

static int group_setup(void **state)
{
    rj_require(state);
    g_srv = tc_start();
    g_peer = rj_start(g_srv, 0);
    print_message("Redisson %s on %s\n", rj_version(g_peer), rh_url(g_srv));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rj_stop(g_peer);
    rh_free(g_srv);
    return 0;
}

static rh_server *standalone(const char *key)
{
    (void)key;
    return g_srv;
}

/* The third way: a Redisson waiter whose JVM is killed at the head of a mixed queue of 20 stays
 * there until its deadline, and nobody behind it is granted before. Redisson puts that deadline
 * at the holder's remaining lease (HOLD_MS when it queued) plus its fairLockWaitTimeout
 * (DEAD_WAIT_MS here, 5 minutes by default); then every rlock waiter is served. */
static void test_fair_dead_redisson_waiter(void **state)
{
    (void)state;
    rj_peer *dead = rj_start_fair(rh_url(g_srv), 0, DEAD_WAIT_MS, NULL);
    rlock_client *c = rj_client(g_srv);
    rjc_fair_env e = {
        .p = g_peer, .c = c, .queue_server = standalone, .dead = dead, .hold_ms = HOLD_MS};
    rjc_fair_result r = rjc_fair_queue(&e, "rjf:dead", 'c', "dcjcjcjcjcjcjcjcjcjc", 9000);
    rlock_client_free(c);
    assert_int_equal(r.not_granted_c, 0);
    double blocked = HOLD_MS + DEAD_WAIT_MS - r.queue_ms;
    print_message("blocked %.0f ms by the dead waiter (its deadline: %.0f ms after the release)\n",
                  r.first_ms, blocked);
    assert_true(r.first_ms > blocked - 500 && r.first_ms < blocked + 1000);
}

/* The second way: Redisson waiters on a JVM whose wall clock is 600 s ahead (libfaketime) take
 * their deadlines and the purge's "now" from it, so each of their attempts purges the rlock
 * waiters queued ahead of them; order is lost. */
static void test_fair_shifted_redisson_clock(void **state)
{
    (void)state;
    if (access(RJ_LIBFAKETIME, R_OK) != 0) {
        skip(); /* Debian's faketime package (tests/run.sh installs it) */
    }
    rj_peer *shifted = rj_start_fair(rh_url(g_srv), 0, 0, SHIFT);
    rlock_client *c = rj_client(g_srv);
    rjc_fair_env e = {.p = shifted, .c = c, .queue_server = standalone};
    rjc_fair_result r = rjc_fair_queue(&e, "rjf:shift", 'c', "cjcjcjcjcjcjcjcjcjcj", 6000);
    rlock_client_free(c);
    rj_stop(shifted);
    assert_int_equal(r.not_granted_c, 0);
    assert_true(r.inversions > 0 || r.not_granted_j > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_dead_redisson_waiter),
        cmocka_unit_test(test_fair_shifted_redisson_clock),
    };
    if (getenv("RJ_TEST") != NULL) {
        cmocka_set_test_filter(getenv("RJ_TEST"));
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
