/*
 * The watchdog on a cluster: 10,000 watchdog holds over all three masters are all renewed,
 * with no CROSSSLOT error on any node (a batch whose keys span slots would get one) and at
 * most one pipeline per master per sweep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "watchdog.h"

#define HOLDS 10000
/* tc_cluster_setup() makes 3 masters, each with one replica. */
#define MASTERS 3

/* The cluster's current epoch as node s sees it: it grows with every failover. */
static long current_epoch(rh_server *s)
{
    const char *argv[] = {"CLUSTER", "INFO", NULL};
    char *info = rh_cmd_str(s, argv);
    assert_non_null(info);
    const char *at = strstr(info, "cluster_current_epoch:");
    long n = at != NULL ? strtol(at + strlen("cluster_current_epoch:"), NULL, 10) : -1;
    free(info);
    return n;
}

/* The cluster of tc_cluster_setup(), with a node timeout of 15 s: this test keeps both CPUs busy
 * for seconds (10,000 acquisitions and their renewals, slower still under TSan), and with the
 * harness' 1 s timeout a node whose cluster-bus pings are late can be failed over in the middle of
 * the renewals, which this test is not about (test_cluster_failover is). */
static int setup(void **state)
{
    if (tc_cluster_setup(state) != 0) {
        return -1;
    }
    const char *argv[] = {"CONFIG", "SET", "cluster-node-timeout", "15000", NULL};
    for (int i = 0; i < rc_node_count(tc_cl); i++) {
        char *ok = rh_cmd_str(rc_node(tc_cl, i), argv);
        if (ok == NULL) {
            return -1;
        }
        free(ok);
    }
    return 0;
}

/* The CROSSSLOT errors a node has answered (INFO errorstats), 0 when none. */
static long crossslot_errors(rh_server *s)
{
    const char *argv[] = {"INFO", "errorstats", NULL};
    char *info = rh_cmd_str(s, argv);
    assert_non_null(info);
    const char *at = strstr(info, "errorstat_CROSSSLOT:count=");
    long n = at != NULL ? strtol(at + strlen("errorstat_CROSSSLOT:count="), NULL, 10) : 0;
    free(info);
    return n;
}

static void test_ten_thousand_holds_renewed(void **state)
{
    (void)state;
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.watchdog_timeout_ms = 3000;
    rlock_client *c = tc_client(&o);
    rlock **locks = calloc(HOLDS, sizeof(rlock *));
    assert_non_null(locks);
    for (int i = 0; i < HOLDS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "wd-%d", i);
        locks[i] = rlock_open(c, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(locks[i], 0, -1), RLOCK_OK);
    }
    long epoch = current_epoch(rc_node(tc_cl, 0));
    rlk_wd_stats before, after;
    rlk_wd_get_stats(c->watchdog, &before);
    /* Every hold renews every second: wait until each was renewed at least once more. */
    int64_t until = rh_now_ms() + 20000;
    do {
        rh_sleep_ms(200);
        rlk_wd_get_stats(c->watchdog, &after);
    } while (after.renewed - before.renewed < 2 * HOLDS && rh_now_ms() < until);
    long crossslot = 0;
    for (int i = 0; i < rc_node_count(tc_cl); i++) {
        crossslot += crossslot_errors(rc_node(tc_cl, i));
    }
    /* Printed before the checks, so that a failure shows every figure. */
    print_message("renewed %llu in %llu sweeps, %llu pipelines (at most %llu in one sweep), "
                  "%llu batches; lost %llu, failures %llu, CROSSSLOT %ld, epoch %ld -> %ld\n",
                  (unsigned long long)(after.renewed - before.renewed),
                  (unsigned long long)(after.ticks - before.ticks),
                  (unsigned long long)(after.pipelines - before.pipelines),
                  (unsigned long long)after.sweep_pipelines_max,
                  (unsigned long long)(after.batches - before.batches),
                  (unsigned long long)after.lost, (unsigned long long)after.failures, crossslot,
                  epoch, current_epoch(rc_node(tc_cl, 0)));
    assert_true(after.renewed - before.renewed >= 2 * HOLDS);
    assert_int_equal(after.lost, 0);
    assert_int_equal(after.failures, 0);
    /* One pipeline per master per sweep. Counted inside each sweep: the two snapshots above can
     * fall in the middle of a sweep, whose tick then counts on one side and its pipelines on the
     * other. */
    assert_true(after.sweep_pipelines_max <= MASTERS);
    assert_int_equal(crossslot, 0);
    for (int i = 0; i < HOLDS; i++) {
        assert_int_equal(rlock_is_held(locks[i]), 1);
        rlock_free(locks[i]);
    }
    free(locks);
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ten_thousand_holds_renewed),
    };
    return cmocka_run_group_tests(tests, setup, tc_cluster_teardown);
}
