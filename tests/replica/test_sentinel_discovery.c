/*
 * Sentinel discovery (issue 13): three redis-servers and three Sentinels started by the harness.
 * A client finds the master through any one Sentinel while the other two are down; a Sentinel
 * that answers nonsense (a plain redis-server) or does not know the master is skipped; all
 * Sentinels down is RLOCK_ECONN naming each of them; a cluster URL is RLOCK_ENOTSUP.
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
#include "tc_sentinel.h"

static tc_deploy g_d;

TC_DEPLOY_FIXTURE(g_d)

static int client_new_url(const char *url, rlock_client **c)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 3000;
    return rlock_client_new(&o, c);
}

/* Takes a lock through c and checks on the master that the key is there. */
static void lock_on_master(rlock_client *c, const char *name)
{
    rlock *l = rlock_open(c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    const char *argv[] = {"EXISTS", name, NULL};
    assert_int_equal(rh_cmd_int(g_d.data[0], argv), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

static void test_discovery_with_two_sentinels_down(void **state)
{
    (void)state;
    for (int up = 0; up < TC_NSENTINEL; up++) {
        for (int i = 0; i < TC_NSENTINEL; i++) {
            if (i != up) {
                assert_int_equal(rh_stop(g_d.sentinel[i]), 0);
            }
        }
        rlock_client *c = NULL;
        int r = client_new_url(g_d.url, &c);
        if (r != RLOCK_OK) {
            fail_msg("Sentinel %d alone: %s", up, rlock_last_error());
        }
        lock_on_master(c, "sd:two-down");
        rlock_client_free(c);
        for (int i = 0; i < TC_NSENTINEL; i++) {
            if (i != up) {
                assert_int_equal(rh_restart(g_d.sentinel[i]), 0);
            }
        }
    }
}

static void test_all_sentinels_down(void **state)
{
    (void)state;
    for (int i = 0; i < TC_NSENTINEL; i++) {
        assert_int_equal(rh_stop(g_d.sentinel[i]), 0);
    }
    rlock_client *c = NULL;
    assert_int_equal(client_new_url(g_d.url, &c), RLOCK_ECONN);
    assert_null(c);
    for (int i = 0; i < TC_NSENTINEL; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", rh_port(g_d.sentinel[i]));
        if (strstr(rlock_last_error(), addr) == NULL) {
            fail_msg("'%s' does not name %s", rlock_last_error(), addr);
        }
        assert_int_equal(rh_restart(g_d.sentinel[i]), 0);
    }
}

/* A plain redis-server and a Sentinel asked for a master it does not know come first in the
 * list: both are skipped. */
static void test_nonsense_sentinels_skipped(void **state)
{
    (void)state;
    char url[256];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#%s",
             rh_port(g_d.data[1]), rh_port(g_d.sentinel[2]), TC_SENTINEL_MASTER);
    rlock_client *c = NULL;
    if (client_new_url(url, &c) != RLOCK_OK) {
        fail_msg("%s", rlock_last_error());
    }
    lock_on_master(c, "sd:nonsense");
    rlock_client_free(c);
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d#nosuchmaster",
             rh_port(g_d.sentinel[0]));
    assert_int_equal(client_new_url(url, &c), RLOCK_ECONN);
    assert_non_null(strstr(rlock_last_error(), "does not know a master named 'nosuchmaster'"));
}

/* A cluster URL whose seed is a server without cluster mode is refused with the server's
 * reason. */
static void test_cluster_url_not_a_cluster(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d", rh_port(g_d.data[0]));
    rlock_client *c = NULL;
    assert_int_equal(client_new_url(url, &c), RLOCK_ECONN);
    assert_non_null(strstr(rlock_last_error(), "cluster support disabled"));
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_discovery_with_two_sentinels_down),
        cmocka_unit_test(test_all_sentinels_down),
        cmocka_unit_test(test_nonsense_sentinels_skipped),
        cmocka_unit_test(test_cluster_url_not_a_cluster))
