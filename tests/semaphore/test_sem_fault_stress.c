/*
 * Two permits, 8 threads on 2 clients (4 each), for SEM_FAULT_MS (default 4 s a case) while a
 * side connection kills connections every 20-100 ms (CLIENT KILL TYPE normal, TYPE pubsub, or
 * both at once) and now and then pauses writes (CLIENT PAUSE WRITE, 50-300 ms). Each thread
 * acquires one permit (wait 10 s), enters an independent in-memory checker (tc_checker.h, read
 * sections: at most 2 inside at once), stays a moment and releases. Passing means the bound was
 * never exceeded, no acquire timed out for lack of permits (a release or acquire whose reply was
 * lost neither lost a permit nor made one), no call failed, and the semaphore ends with its 2
 * permits and no leased permit. One case for plain permits, one for leased permits (watchdog and 10
 * s leases alternating).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_checker.h"
#include "tc_thread.h"

#define PERMITS 2
#define CLIENTS 2
#define THREADS 4 /* per client */

typedef struct run {
    rh_server *srv;
    const char *name;
    int leased;
    int64_t until_ms;
    tc_mx *mx;
    rlock_semaphore *sem[CLIENTS];
    atomic_long rounds, errors, timeouts;
    atomic_int stop;
    long kills, pauses;
} run;

typedef struct worker {
    run *run;
    int index;
    char err[240];
} worker;

static void note(worker *w, const char *what, int rc)
{
    if (rc == RLOCK_ETIMEDOUT) {
        atomic_fetch_add(&w->run->timeouts, 1);
    }
    atomic_fetch_add(&w->run->errors, 1);
    snprintf(w->err, sizeof(w->err), "%s: %s", what, rlock_last_error());
}

/* One round: acquire, the checked section, release. */
static void worker_round(worker *w, rlock_semaphore *s, unsigned *seed, long i)
{
    run *r = w->run;
    char id[RLOCK_PERMIT_ID_LEN + 1];
    int rc = r->leased ? rlock_semaphore_acquire_leased(s, 10000, i % 2 ? 10000 : -1, id)
                       : rlock_semaphore_acquire(s, 1, 10000);
    if (rc != RLOCK_OK) {
        note(w, "acquire", rc);
        return;
    }
    tc_mx_read_enter(r->mx, 0);
    usleep(200 + rand_r(seed) % 800);
    tc_mx_read_leave(r->mx, 0);
    rc = r->leased ? rlock_semaphore_release_leased(s, id) : rlock_semaphore_release(s, 1);
    if (rc != RLOCK_OK) {
        note(w, "release", rc);
    }
    atomic_fetch_add(&r->rounds, 1);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    run *r = w->run;
    rlock_semaphore *s = r->sem[w->index % CLIENTS];
    unsigned seed = (unsigned)w->index * 7919U + 1U;
    for (long i = 0; rh_now_ms() < r->until_ms; i++) {
        worker_round(w, s, &seed, i);
    }
    if (w->err[0] != '\0') {
        fprintf(stderr, "thread %d, last error: %s\n", w->index, w->err);
    }
    return NULL;
}

/* One fault: a pause of writes (10%), a kill of the subscriber connections (15%), of every
 * connection at once, data and subscriber (15%), or of the data connections (60%). */
static void fault_once(redisContext *raw, unsigned *seed, run *r)
{
    int pick = (int)(rand_r(seed) % 20);
    redisReply *rep = NULL;
    if (pick < 2) {
        rep = redisCommand(raw, "CLIENT PAUSE %d WRITE", 50 + (int)(rand_r(seed) % 250));
        r->pauses++;
    } else {
        if (pick < 8) {
            rep = redisCommand(raw, "CLIENT KILL TYPE pubsub");
            freeReplyObject(rep);
            rep = NULL;
        }
        if (pick >= 5) {
            rep = redisCommand(raw, "CLIENT KILL TYPE normal SKIPME yes");
        }
        r->kills++;
    }
    freeReplyObject(rep);
}

static void *faults_main(void *arg)
{
    run *r = arg;
    redisContext *raw = rh_connect(r->srv);
    unsigned seed = 12345;
    while (raw != NULL && !atomic_load(&r->stop)) {
        rh_sleep_ms(20 + rand_r(&seed) % 81);
        fault_once(raw, &seed, r);
    }
    redisFree(raw);
    return NULL;
}

static void run_case(const char *name, int leased)
{
    int64_t ms = 4000;
    const char *env = getenv("SEM_FAULT_MS");
    if (env != NULL && atoi(env) > 0) {
        ms = atoi(env);
    }
    static run r;
    memset(&r, 0, sizeof(r));
    r.srv = tc_start();
    r.name = name;
    r.leased = leased;
    r.mx = tc_mx_new();
    assert_non_null(r.mx);
    rlock_client *c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = tc_client_tuned(r.srv, 0, 1000, NULL, NULL);
        r.sem[i] = rlock_semaphore_open(c[i], name);
        assert_non_null(r.sem[i]);
    }
    assert_int_equal(rlock_semaphore_try_set_permits(r.sem[0], PERMITS), 1);
    pthread_t faults;
    assert_int_equal(pthread_create(&faults, NULL, faults_main, &r), 0);
    r.until_ms = rh_now_ms() + ms;
    worker w[CLIENTS * THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < CLIENTS * THREADS; i++) {
        w[i].run = &r;
        w[i].index = i;
    }
    int started = tc_threads_run(CLIENTS * THREADS, worker_main, w, sizeof(w[0]));
    atomic_store(&r.stop, 1);
    pthread_join(faults, NULL);
    redisContext *raw = rh_connect(r.srv);
    redisReply *rep = redisCommand(raw, "CLIENT UNPAUSE");
    freeReplyObject(rep);
    redisFree(raw);
    long rounds = atomic_load(&r.rounds);
    print_message("%s: %ld rounds, %ld kills, %ld pauses, %ld errors (%ld timeouts), at most %ld "
                  "inside\n",
                  name, rounds, r.kills, r.pauses, atomic_load(&r.errors), atomic_load(&r.timeouts),
                  tc_mx_max_readers(r.mx, 0));
    assert_int_equal(started, CLIENTS * THREADS);
    assert_int_equal(atomic_load(&r.errors), 0);
    assert_int_equal(tc_mx_max_readers(r.mx, 0), PERMITS); /* never more, and reached */
    assert_int_equal(tc_mx_reads(r.mx, 0), rounds);
    assert_true(rounds >= 100);
    assert_true(r.kills >= 10);
    assert_true(r.pauses >= 1);
    assert_int_equal(rlock_semaphore_available(r.sem[0]), PERMITS);
    char zset[64];
    snprintf(zset, sizeof(zset), "{%s}:timeout", name);
    const char *zcard[] = {"ZCARD", zset, NULL};
    assert_int_equal(rh_cmd_int(r.srv, zcard), 0);
    for (int i = 0; i < CLIENTS; i++) {
        sc_close(r.sem[i], c[i]);
    }
    tc_mx_free(r.mx);
    rh_free(r.srv);
}

static void test_plain_permits_under_kills(void **state)
{
    (void)state;
    run_case("fs:plain", 0);
}

static void test_leased_permits_under_kills(void **state)
{
    (void)state;
    run_case("fs:leased", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_permits_under_kills),
        cmocka_unit_test(test_leased_permits_under_kills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
