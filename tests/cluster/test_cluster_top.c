/*
 * rlock top on a Redis Cluster (issue 31): every master is scanned. A 3-master cluster without
 * replicas (nothing here needs one) holds a lock on each master, a fair lock with a waiter, a
 * leased semaphore and a name that does not match; the built binary (argv[1]) given the seed URL
 * must show each matching name once, and rlock_survey() the same set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../cli/cli_spawn.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_thread.h"

static int bg_fair(void *arg)
{
    int rc = rlock_try_lock(arg, 50000, -1);
    return rc == RLOCK_OK ? rlock_unlock(arg) : rc;
}

static void test_top_every_master(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    char names[3][64];
    rlock *held[3];
    for (int i = 0; i < 3; i++) {
        tc_cluster_name_on(i, "ctop:", names[i], sizeof(names[i]));
        held[i] = tc_hold(c, i == 0 ? RLOCK_FAIR : RLOCK_REENTRANT, names[i]);
    }
    rlock *other = tc_hold(c, RLOCK_REENTRANT, "elsewhere");
    rlock_semaphore *sem = rlock_semaphore_open(c, "ctop:sem");
    char permit[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 2), 1);
    assert_int_equal(rlock_semaphore_acquire_leased(sem, 0, 60000, permit), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, bg_fair, held[0]);
    rlock_lock_info *in = NULL;
    for (int i = 0; i < 500; i++) {
        assert_int_equal(rlock_inspect(c, names[0], &in), RLOCK_OK);
        size_t q = in->n_queue;
        rlock_lock_info_free(in);
        if (q == 1) {
            break;
        }
        rh_sleep_ms(10);
    }

    const char *argv[] = {"rlock", "--url", rc_seed_url(tc_cl), "top", "--json", "ctop:*", NULL};
    assert_int_equal(ct_run(argv, "out", "err"), 0);
    print_message("%s", ct_slurp("err"));
    const char *doc = ct_slurp("out");
    print_message("%s", doc);
    assert_non_null(strstr(doc, "\"count\":4,"));
    for (int i = 0; i < 3; i++) {
        char key[96];
        snprintf(key, sizeof(key), "{\"name\":\"%s\",\"type\":\"%s\",\"waiters\":%d,", names[i],
                 i == 0 ? "fair" : "reentrant", i == 0);
        assert_int_equal(ct_count_of(doc, key), 1);
    }
    assert_int_equal(ct_count_of(doc, "{\"name\":\"ctop:sem\",\"type\":\"semaphore_leased\""), 1);
    assert_null(strstr(doc, "elsewhere"));
    /* The fair lock (one waiter) comes first. */
    assert_true(strstr(doc, names[0]) < strstr(doc, "ctop:sem"));

    rlock_object_info *v = NULL;
    size_t n = 0;
    assert_int_equal(rlock_survey(c, "ctop:*", &v, &n), RLOCK_OK);
    assert_int_equal(n, 4);
    rlock_survey_free(v, n);

    for (int i = 0; i < 3; i++) {
        assert_int_equal(rlock_unlock(held[i]), RLOCK_OK);
    }
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release_leased(sem, permit), RLOCK_OK);
    assert_int_equal(rlock_unlock(other), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        rlock_free(held[i]);
    }
    rlock_free(other);
    rlock_semaphore_free(sem);
    rlock_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    tc_cl = rc_start(3, 0);
    return tc_cl != NULL && ct_dir_init() == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ct_dir_remove();
    rc_free(tc_cl);
    tc_cl = NULL;
    return 0;
}

TC_MAIN_PATH(ct_bin, "path of rlock", setup, teardown, cmocka_unit_test(test_top_every_master))
