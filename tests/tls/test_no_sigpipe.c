/*
 * No signal from rlock (real redis-server): 8 threads take and release locks with 256 KiB names
 * (each request takes several writes) while the server is killed with SIGKILL, with SIGPIPE at
 * its default disposition, which kills the process if any write raises it. The process must
 * survive, calls made while the server is down fail with RLOCK_ECONN only, and after a restart
 * every thread succeeds again. Over plain TCP and over TLS.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"

#define THREADS  8
#define NAME_LEN (256 * 1024)
#define CYCLES   3

enum { PHASE_UP, PHASE_DOWN, PHASE_BACK, PHASE_STOP };

typedef struct worker {
    rlock_client *c;
    atomic_int *phase;
    int id;
    atomic_long ok[3]; /* read by the main thread while the worker runs */
    long econn[3], other[3];
    int other_code;
    char first_error[256]; /* of the phase "up", where no call may fail */
} worker;

static void *worker_main(void *p)
{
    worker *w = p;
    char *name = malloc(NAME_LEN + 1);
    memset(name, 'a' + w->id, NAME_LEN);
    name[NAME_LEN] = '\0';
    rlock *l = rlock_open(w->c, RLOCK_REENTRANT, name);
    while (l != NULL && atomic_load(w->phase) != PHASE_STOP) {
        int r = rlock_try_lock(l, 0, 10000);
        if (r == RLOCK_OK) {
            r = rlock_unlock(l);
        }
        /* Counted in the phase it ended in: a call cut by the kill belongs to "down". */
        int ph = atomic_load(w->phase);
        if (ph == PHASE_STOP) {
            break;
        }
        /* After the restart the server has lost the holds of the killed one: an unlock may
         * find its lock gone (ELOST) until the first clean pair. */
        if (r == RLOCK_OK) {
            atomic_fetch_add(&w->ok[ph], 1);
        } else if (ph == PHASE_UP && w->first_error[0] == '\0') {
            snprintf(w->first_error, sizeof(w->first_error), "%d %s", r, rlock_last_error());
        }
        if (r == RLOCK_OK) {
        } else if (r == RLOCK_ECONN) {
            w->econn[ph]++;
            rh_sleep_ms(2); /* no busy loop against a dead server: the restart needs the CPU */
        } else if (!(ph == PHASE_BACK && r == RLOCK_ELOST)) {
            w->other[ph]++;
            w->other_code = r;
        }
    }
    rlock_free(l);
    free(name);
    return NULL;
}

static long sum(worker *w, int which, int ph)
{
    long n = 0;
    for (int i = 0; i < THREADS; i++) {
        n += which == 0 ? atomic_load(&w[i].ok[ph]) : which == 1 ? w[i].econn[ph] : w[i].other[ph];
    }
    return n;
}

/* Waits up to 20 s until every worker had a success in phase ph since its count was base[i]. */
static int all_succeeded(worker *w, int ph, const long *base)
{
    for (int64_t end = rh_now_ms() + 20000; rh_now_ms() < end; rh_sleep_ms(50)) {
        int n = 0;
        for (int i = 0; i < THREADS; i++) {
            n += atomic_load(&w[i].ok[ph]) > (base != NULL ? base[i] : 0);
        }
        if (n == THREADS) {
            return 1;
        }
    }
    return 0;
}

static void run(rh_server *s, const char *ca)
{
    rlock_options o;
    tc_options(&o, s);
    o.tls_ca_file = ca;
    o.pool_size = THREADS;
    o.connect_timeout_ms = 2000;
    o.command_timeout_ms = 2000;
    rlock_client *c = tc_client(&o);
    /* The harness ignores SIGPIPE for its own sake; this test needs the default (death). */
    struct sigaction dfl, cur;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    assert_int_equal(sigaction(SIGPIPE, &dfl, NULL), 0);
    assert_int_equal(sigaction(SIGPIPE, NULL, &cur), 0);
    assert_true(cur.sa_handler == SIG_DFL);

    atomic_int phase = PHASE_UP;
    worker w[THREADS];
    pthread_t th[THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < THREADS; i++) {
        w[i].c = c;
        w[i].phase = &phase;
        w[i].id = i;
        for (int k = 0; k < 3; k++) {
            atomic_init(&w[i].ok[k], 0);
        }
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    int up = all_succeeded(w, PHASE_UP, NULL);
    int back = 1;
    /* Several kills: each is a new chance for a write to meet a reset connection. */
    for (int cycle = 0; cycle < CYCLES && up && back; cycle++) {
        long base[THREADS];
        for (int i = 0; i < THREADS; i++) {
            base[i] = atomic_load(&w[i].ok[PHASE_BACK]);
        }
        /* The phase changes first: a call that fails from here on is counted as "down". */
        atomic_store(&phase, PHASE_DOWN);
        assert_int_equal(rh_stop(s), 0); /* SIGKILL while the workers are mid-command */
        rh_sleep_ms(500);
        atomic_store(&phase, PHASE_BACK);
        assert_int_equal(rh_restart(s), 0);
        back = all_succeeded(w, PHASE_BACK, base);
    }
    atomic_store(&phase, PHASE_STOP);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    rlock_client_free(c);
    signal(SIGPIPE, SIG_IGN);
    print_message("%s: up ok %ld; down ok %ld, econn %ld, other %ld; back ok %ld, other %ld\n",
                  o.url, sum(w, 0, PHASE_UP), sum(w, 0, PHASE_DOWN), sum(w, 1, PHASE_DOWN),
                  sum(w, 2, PHASE_DOWN), sum(w, 0, PHASE_BACK), sum(w, 2, PHASE_BACK));
    for (int i = 0; i < THREADS; i++) {
        if (w[i].first_error[0] != '\0') {
            print_message("worker %d, while the server was up: %s\n", i, w[i].first_error);
        }
    }
    assert_true(up);
    assert_int_equal(sum(w, 2, PHASE_UP) + sum(w, 1, PHASE_UP), 0);
    assert_true(sum(w, 1, PHASE_DOWN) > 0);
    assert_int_equal(sum(w, 2, PHASE_DOWN), 0);
    assert_true(back);
    assert_int_equal(sum(w, 2, PHASE_BACK), 0);
}

static void test_plain(void **state)
{
    (void)state;
    rh_server *s = rh_start(NULL);
    assert_non_null(s);
    run(s, NULL);
    rh_free(s);
}

static void test_tls(void **state)
{
    (void)state;
    const char *dir = getenv("RLOCK_TLS_CERTS");
    assert_non_null(dir);
    rh_tls t = {.dir = dir};
    rh_server *s = rh_start_tls(&t, NULL);
    assert_non_null(s);
    char ca[4096];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    run(s, ca);
    rh_free(s);
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
