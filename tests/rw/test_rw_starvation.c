/*
 * Writer starvation (real redis-server): 16 reader threads re-acquire the read side back to back
 * with 5 ms holds, so the lock is practically never free of readers. 20 times a writer starts to
 * wait:
 *  - default (writer preference): it must get the lock within 500 ms every time (new readers wait
 *    behind it);
 *  - rw_reader_preferring = 1 (Redisson's behaviour): it must NOT get in within 500 ms in most
 *    repetitions (the try_lock wait of 500 ms bounds each repetition).
 * Between repetitions the readers must be making progress, so the contention is real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rw_util.h"

#define READERS 16
#define ROUNDS  20

static rh_server *g_srv;

typedef struct readers_ctl {
    rlock *r;
    atomic_int stop;
    atomic_long reads;
    atomic_int errors;
} readers_ctl;

static void *reader_main(void *p)
{
    readers_ctl *ctl = p;

    /* Spread the start so that holds do not all begin and end together. */
    rh_sleep_ms(rand() % 6);
    while (!atomic_load(&ctl->stop)) {
        int rc = rlock_try_lock(ctl->r, 10000, 10000);

        if (rc != RLOCK_OK) {
            atomic_fetch_add(&ctl->errors, 1);
            continue;
        }
        rh_sleep_ms(5);
        if (rlock_unlock(ctl->r) != RLOCK_OK) {
            atomic_fetch_add(&ctl->errors, 1);
        }
        atomic_fetch_add(&ctl->reads, 1);
    }
    return NULL;
}

/* Runs the rounds; returns how many writer acquisitions took at most 500 ms. */
static int run_rounds(int reader_preferring, const char *name, int64_t *worst)
{
    rlock_client *c = rw_client(g_srv, 0, reader_preferring, 0);
    rlock *r, *w;
    readers_ctl ctl;
    pthread_t th[READERS];
    int fast = 0;
    int stalled = -1, not_locked = -1, bad_rc = 0;

    assert_non_null(c);
    r = rlock_open(c, RLOCK_READ, name);
    w = rlock_open(c, RLOCK_WRITE, name);
    assert_non_null(r);
    assert_non_null(w);
    ctl.r = r;
    atomic_init(&ctl.stop, 0);
    atomic_init(&ctl.reads, 0);
    atomic_init(&ctl.errors, 0);
    for (int i = 0; i < READERS; i++) {
        pthread_create(&th[i], NULL, reader_main, &ctl);
    }
    rh_sleep_ms(300);
    *worst = 0;
    for (int round = 0; round < ROUNDS; round++) {
        long before = atomic_load(&ctl.reads);
        int64_t t0, el;
        int rc;

        rh_sleep_ms(100);
        /* Failures are recorded and asserted after the readers stopped (they use ctl). */
        if (atomic_load(&ctl.reads) <= before) {
            stalled = round;
            break;
        }
        if (rlock_is_locked(r) < 0) {
            not_locked = round;
        }
        t0 = rh_now_ms();
        rc = rlock_try_lock(w, reader_preferring ? 500 : 3000, 10000);
        el = rh_now_ms() - t0;
        if (rc == RLOCK_OK) {
            rh_sleep_ms(5);
            bad_rc += rlock_unlock(w) != RLOCK_OK;
            if (el <= 500) {
                fast++;
            }
        } else {
            bad_rc += rc != RLOCK_ETIMEDOUT;
        }
        if (el > *worst) {
            *worst = el;
        }
    }
    atomic_store(&ctl.stop, 1);
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
    }
    print_message(
        "stalled round %d, is_locked failed in round %d, bad results %d, reader errors %d\n",
        stalled, not_locked, bad_rc, atomic_load(&ctl.errors));
    assert_int_equal(stalled, -1);
    assert_int_equal(not_locked, -1);
    assert_int_equal(bad_rc, 0);
    assert_int_equal(atomic_load(&ctl.errors), 0);
    print_message("reader_preferring=%d: %d/%d writer grants within 500 ms, worst wait %lld ms, "
                  "%ld reads\n",
                  reader_preferring, fast, ROUNDS, (long long)*worst, atomic_load(&ctl.reads));
    rlock_free(r);
    rlock_free(w);
    rlock_client_free(c);
    return fast;
}

static void test_writer_not_starved(void **state)
{
    int64_t worst = 0;

    (void)state;
    assert_int_equal(run_rounds(0, "rw:starve:fair", &worst), ROUNDS);
    assert_true(worst <= 500);
}

static void test_reader_preferring_starves_writer(void **state)
{
    int64_t worst = 0;

    (void)state;
    assert_true(run_rounds(1, "rw:starve:redisson", &worst) < ROUNDS / 2);
}

TC_SERVER_FIXTURE(g_srv)

TC_MAIN(setup, teardown, cmocka_unit_test(test_writer_not_starved),
        cmocka_unit_test(test_reader_preferring_starves_writer))
