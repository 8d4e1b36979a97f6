/*
 * rlock's drain, set permits, lease updates and remaining leases, release-if-exists, total and
 * leased counts, several leased permits per call, trySetPermits with a TTL and latch deletes
 * against the released Redisson (the Java peer of redisson_java.h) on one redis-server: each
 * side's call changes what the other side reads, so both keep the same data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_harness.h"
#include "redisson_java.h"
#include "rlock.h"
#include "tc_redis.h"

static rh_server *g_srv;
static rj_peer *g_peer;
static rlock_client *g_c;

static int group_setup(void **state)
{
    rj_require(state);
    g_srv = tc_start();
    g_peer = rj_start(g_srv, 0);
    g_c = rj_client(g_srv);
    print_message("Redisson %s, client id %s\n", rj_version(g_peer), rj_id(g_peer));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rlock_client_free(g_c);
    rj_stop(g_peer);
    rh_free(g_srv);
    return 0;
}

/* The peer's reply to fmt's request as a number (the test fails on a reply that is not one). */
static long long java_num(const char *worker, const char *request)
{
    char *r = rj_call(g_peer, worker, "%s", request);
    char *end = NULL;
    long long v = strtoll(r, &end, 10);
    if (end == r || *end != '\0') {
        fail_msg("'%s' answered '%s'", request, r);
    }
    free(r);
    return v;
}

static void test_drain_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:drain");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 5), 1);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_OK);
    assert_int_equal(java_num("d", "sdrain rjo:drain"), 4);
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_release(s, 3), RLOCK_OK);
    assert_int_equal(rlock_semaphore_drain(s), 3);
    assert_int_equal(java_num("d", "savail rjo:drain"), 0);
    assert_int_equal(java_num("d", "sdrain rjo:drain"), 0);
    rlock_semaphore_free(s);
}

static void test_set_permits_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:set");
    rj_expect(g_peer, "p", "ok", "psetp rjo:set 2");
    char *r = rj_call(g_peer, "p", "pacq rjo:set 0 60000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    assert_int_equal(strlen(java_id), RLOCK_PERMIT_ID_LEN);
    /* rlock's total counts Redisson's leased permit as Redisson's does. */
    assert_int_equal(rlock_semaphore_set_permits(s, 5), RLOCK_OK);
    assert_int_equal(java_num("p", "pperm rjo:set"), 5);
    assert_int_equal(java_num("p", "pavail rjo:set"), 4);
    assert_int_equal(java_num("p", "pheld rjo:set"), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    rj_expect(g_peer, "p", "ok", "psetp rjo:set 3");
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(rlock_semaphore_set_permits(s, 1), RLOCK_OK);
    assert_int_equal(java_num("p", "pperm rjo:set"), 1);
    assert_int_equal(rlock_semaphore_available(s), 0); /* -1 on Redis */
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(java_num("p", "pavail rjo:set"), 1);
    rlock_semaphore_free(s);
}

static void test_update_lease_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:lease");
    char req[128];
    rj_expect(g_peer, "l", "true", "pset rjo:lease 2");
    char *r = rj_call(g_peer, "l", "pacq rjo:lease 0 1000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    /* rlock lengthens Redisson's permit: Redisson reads the new lease. */
    assert_int_equal(rlock_semaphore_update_lease(s, java_id, 60000), RLOCK_OK);
    snprintf(req, sizeof(req), "please rjo:lease %s", java_id);
    long long left = java_num("l", req);
    assert_true(left > 50000 && left <= 60000);
    /* Redisson shortens rlock's permit: it runs out for rlock. */
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    rj_expect(g_peer, "l", "true", "pupd rjo:lease %s 200", id);
    rh_sleep_ms(500);
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ENOTOWNER);
    /* Neither side updates a permit that is gone. */
    assert_int_equal(rlock_semaphore_update_lease(s, id, 1000), RLOCK_ENOTOWNER);
    rj_expect(g_peer, "l", "false", "pupd rjo:lease %s 1000", id);
    assert_int_equal(rlock_semaphore_release_leased(s, java_id), RLOCK_OK);
    rj_expect(g_peer, "l", "false", "pupd rjo:lease %s 1000", java_id);
    rlock_semaphore_free(s);
}

static void test_release_if_exists_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:rie");
    /* Redisson 3.x has no releaseIfExists: rlock's side only. */
    int java = strncmp(rj_version(g_peer), "3.", 2) != 0;
    assert_int_equal(rlock_semaphore_release_if_exists(s, 1), 0);
    if (java) {
        rj_expect(g_peer, "r", "false", "sriex rjo:rie 1");
    }
    rj_expect(g_peer, "r", "true", "sset rjo:rie 1");
    assert_int_equal(rlock_semaphore_release_if_exists(s, 2), 1);
    assert_int_equal(java_num("r", "savail rjo:rie"), 3);
    if (java) {
        rj_expect(g_peer, "r", "true", "sriex rjo:rie 1");
        assert_int_equal(rlock_semaphore_available(s), 4);
    }
    rlock_semaphore_free(s);
}

static void test_permits_and_acquired_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:total");
    rj_expect(g_peer, "t", "true", "pset rjo:total 3");
    char *r = rj_call(g_peer, "t", "pacq rjo:total 0 60000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    assert_int_equal(rlock_semaphore_permits(s), 3);
    assert_int_equal(rlock_semaphore_acquired(s), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 60000, id), RLOCK_OK);
    assert_int_equal(java_num("t", "pperm rjo:total"), 3);
    assert_int_equal(java_num("t", "pheld rjo:total"), 2);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    assert_int_equal(java_num("t", "pheld rjo:total"), 1);
    rlock_semaphore_free(s);
}

static void test_latch_delete_both_ways(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(g_c, "rjo:latch");
    rj_expect(g_peer, "l", "true", "lset rjo:latch 2");
    assert_int_equal(rlock_latch_delete(l), 1);
    assert_int_equal(java_num("l", "lcount rjo:latch"), 0);
    rj_expect(g_peer, "l", "false", "ldel rjo:latch");
    assert_int_equal(rlock_latch_try_set_count(l, 2), 1);
    rj_expect(g_peer, "l", "true", "ldel rjo:latch");
    assert_int_equal(rlock_latch_count(l), 0);
    assert_int_equal(rlock_latch_delete(l), 0);
    rlock_latch_free(l);
}

/* Several leased permits per call: each side releases the other side's ids in one call. */
static void test_leased_n_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:n");
    rj_expect(g_peer, "n", "true", "pset rjo:n 5");
    char ids[3][RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased_n(s, 3, 0, 60000, ids), RLOCK_OK);
    assert_int_equal(java_num("n", "pheld rjo:n"), 3);
    char req[256];
    snprintf(req, sizeof(req), "preln rjo:n %s,%s,%s", ids[0], ids[1], ids[2]);
    assert_int_equal(java_num("n", req), 3);
    assert_int_equal(rlock_semaphore_available(s), 5);
    char *r = rj_call(g_peer, "n", "pacqn rjo:n 2 0 60000");
    char java_ids[2][64];
    assert_int_equal(sscanf(r, "%32[0-9a-f],%32[0-9a-f]", java_ids[0], java_ids[1]), 2);
    free(r);
    assert_int_equal(rlock_semaphore_acquired(s), 2);
    const char *rel[] = {java_ids[0], java_ids[1], ids[0]};
    assert_int_equal(rlock_semaphore_release_leased_n(s, rel, 3), 2);
    assert_int_equal(java_num("n", "pavail rjo:n"), 5);
    rlock_semaphore_free(s);
}

/* trySetPermits with a TTL: each side's TTL makes the other side's set fail until it runs out. */
static void test_try_set_ttl_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:ttl");
    rj_expect(g_peer, "x", "true", "ssetttl rjo:ttl 2 1000");
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 5, 1000), 0);
    assert_int_equal(rlock_semaphore_available(s), 2);
    rh_sleep_ms(1200);
    assert_int_equal(rlock_semaphore_try_set_permits_ttl(s, 3, 1000), 1);
    rj_expect(g_peer, "x", "false", "ssetttl rjo:ttl 5 1000");
    assert_int_equal(java_num("x", "savail rjo:ttl"), 3);
    rh_sleep_ms(1200);
    assert_int_equal(java_num("x", "savail rjo:ttl"), 0);
    rj_expect(g_peer, "x", "true", "ssetttl rjo:ttl 1 60000");
    rlock_semaphore_free(s);
}

/* Each side reads the remaining lease of the other side's permit. */
static void test_remaining_lease_both_ways(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "rjo:left");
    rj_expect(g_peer, "y", "true", "pset rjo:left 3");
    char *r = rj_call(g_peer, "y", "pacq rjo:left 0 30000");
    char java_id[64];
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    int64_t left = 0;
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, java_id, &left), RLOCK_OK);
    assert_true(left > 25000 && left <= 30000);
    r = rj_call(g_peer, "y", "pacq rjo:left 0 -1"); /* Redisson: no lease, no expiry */
    assert_int_equal(sscanf(r, "%63s", java_id), 1);
    free(r);
    assert_int_equal(rlock_semaphore_remaining_lease_ms(s, java_id, &left), RLOCK_OK);
    assert_int_equal(left, -1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 40000, id), RLOCK_OK);
    char req[128];
    snprintf(req, sizeof(req), "please rjo:left %s", id);
    long long java_left = java_num("y", req);
    assert_true(java_left > 35000 && java_left <= 40000);
    rlock_semaphore_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drain_both_ways),
        cmocka_unit_test(test_set_permits_both_ways),
        cmocka_unit_test(test_update_lease_both_ways),
        cmocka_unit_test(test_release_if_exists_both_ways),
        cmocka_unit_test(test_permits_and_acquired_both_ways),
        cmocka_unit_test(test_latch_delete_both_ways),
        cmocka_unit_test(test_leased_n_both_ways),
        cmocka_unit_test(test_try_set_ttl_both_ways),
        cmocka_unit_test(test_remaining_lease_both_ways),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
