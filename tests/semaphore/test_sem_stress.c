/*
 * "At most N at once" under load: N = 3 permits, 4 processes x 4 threads, each thread acquiring
 * and releasing one permit 200 times (3,200 acquisitions; 100 per thread under ThreadSanitizer;
 * SEM_STRESS_PER_THREAD overrides). Half the acquisitions are plain permits, half leased permits
 * under the watchdog, so both paths share the one count.
 *
 * The checker is independent of the semaphore: inside, a thread INCRs an occupancy counter (an
 * atomic count of threads inside, read from INCR's reply), records a violation if the reply
 * exceeds N, raises a high-water mark (a compare-and-set loop with WATCH/MULTI, so the maximum
 * is exact), stays inside briefly so that occupancy can build up, and DECRs before releasing.
 * Passing means no violation, a high-water mark of exactly N (N at once was reached), every
 * acquisition done, and the semaphore back at N permits with no leased permit left.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "sem_common.h"
#include "tc_thread.h"

#if defined(__SANITIZE_THREAD__)
#define SC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SC_TSAN 1
#endif
#endif
#ifndef SC_TSAN
#define SC_TSAN 0
#endif

#define PERMITS    3 /* also in the SET below */
#define PROCS      4
#define THREADS    4
#define NAME       "sem:stress"
#define INSIDE     "sem:stress:inside"
#define HIGH       "sem:stress:high"
#define VIOLATIONS "sem:stress:violations"
#define DONE       "sem:stress:done"

static rh_server *g_srv;
static int g_per_thread;

typedef struct worker {
    rlock_semaphore *s;
    int errors;
    char err[200];
} worker;

/* Raises HIGH to v if it is lower (optimistic transaction: retried when HIGH changed). */
static int raise_high(redisContext *ctx, long long v)
{
    for (;;) {
        redisReply *r = redisCommand(ctx, "WATCH %s", HIGH);
        if (r == NULL) {
            return -1;
        }
        freeReplyObject(r);
        const char *get[] = {"GET", HIGH};
        if (tc_int(ctx, 2, get) >= v) {
            r = redisCommand(ctx, "UNWATCH");
            freeReplyObject(r);
            return 0;
        }
        r = redisCommand(ctx, "MULTI");
        freeReplyObject(r);
        r = redisCommand(ctx, "SET %s %lld", HIGH, v);
        freeReplyObject(r);
        r = redisCommand(ctx, "EXEC");
        if (r == NULL) {
            return -1;
        }
        int done = r->type == REDIS_REPLY_ARRAY;
        freeReplyObject(r);
        if (done) {
            return 0;
        }
    }
}

static int inside(redisContext *ctx)
{
    const char *incr[] = {"INCR", INSIDE};
    long long v = tc_int(ctx, 2, incr);
    if (v < 1) {
        return -1;
    }
    if (v > PERMITS) {
        const char *viol[] = {"INCR", VIOLATIONS};
        tc_int(ctx, 2, viol);
    }
    if (raise_high(ctx, v) != 0) {
        return -1;
    }
    usleep(300);
    const char *decr[] = {"DECR", INSIDE};
    const char *done[] = {"INCR", DONE};
    return tc_int(ctx, 2, decr) < 0 || tc_int(ctx, 2, done) < 1 ? -1 : 0;
}

static void note_error(worker *w, const char *what, int r)
{
    snprintf(w->err, sizeof(w->err), "%s: %s: %s", what, rlock_strerror(r), rlock_last_error());
    w->errors++;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    redisContext *ctx = rh_connect(g_srv);
    if (ctx == NULL) {
        w->errors++;
        return NULL;
    }
    char id[RLOCK_PERMIT_ID_LEN + 1];
    for (int i = 0; i < g_per_thread; i++) {
        int leased = i % 2;
        int r = leased ? rlock_semaphore_acquire_leased(w->s, RLOCK_WAIT_FOREVER, -1, id)
                       : rlock_semaphore_acquire(w->s, 1, RLOCK_WAIT_FOREVER);
        if (r != RLOCK_OK) {
            note_error(w, "acquire", r);
            continue;
        }
        if (inside(ctx) != 0) {
            w->errors++;
        }
        r = leased ? rlock_semaphore_release_leased(w->s, id) : rlock_semaphore_release(w->s, 1);
        if (r != RLOCK_OK) {
            note_error(w, "release", r);
        }
    }
    redisFree(ctx);
    return NULL;
}

static int child_main(void *arg)
{
    (void)arg;
    rlock_client *c = sc_client(g_srv);
    rlock_semaphore *s = c ? rlock_semaphore_open(c, NAME) : NULL;
    if (s == NULL) {
        rlock_client_free(c);
        return 2;
    }
    worker w[THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < THREADS; i++) {
        w[i].s = s;
    }
    int started = tc_threads_run(THREADS, worker_main, w, sizeof(w[0]));
    int errors = started == THREADS ? 0 : 1;
    for (int i = 0; i < started; i++) {
        errors += w[i].errors;
        if (w[i].errors > 0) {
            fprintf(stderr, "child thread %d: %d errors, last: %s\n", i, w[i].errors, w[i].err);
        }
    }
    sc_close(s, c);
    return errors == 0 ? 0 : 2;
}

static void test_at_most_n_inside(void **state)
{
    (void)state;
    g_per_thread = SC_TSAN ? 100 : 200;
    const char *env = getenv("SEM_STRESS_PER_THREAD");
    if (env != NULL && atoi(env) > 0) {
        g_per_thread = atoi(env);
    }
    int total = g_per_thread * PROCS * THREADS;
    g_srv = tc_start();
    /* The permits are set with a plain SET: the children are forked before this process
     * starts any thread (a client would start two). */
    const char *set[] = {"SET", NAME, "3", NULL};
    free(rh_cmd_str(g_srv, set));
    int64_t t0 = rh_now_ms();
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        kids[i] = rh_fork_child(child_main, NULL);
        assert_true(kids[i] > 0);
    }
    int statuses[PROCS];
    for (int i = 0; i < PROCS; i++) {
        statuses[i] = rh_wait_child(kids[i], 240000);
    }
    int64_t took = rh_now_ms() - t0;
    rlock_client *c = sc_client(g_srv);
    rlock_semaphore *s = rlock_semaphore_open(c, NAME);
    const char *get_high[] = {"GET", HIGH, NULL};
    const char *get_viol[] = {"GET", VIOLATIONS, NULL};
    const char *get_done[] = {"GET", DONE, NULL};
    const char *zcard[] = {"ZCARD", "{" NAME "}:timeout", NULL};
    char *v = rh_cmd_str(g_srv, get_viol);
    long long violations = v != NULL ? atoll(v) : 0;
    free(v);
    long long high = rh_cmd_int(g_srv, get_high);
    long long done = rh_cmd_int(g_srv, get_done);
    print_message("%d processes x %d threads, %d permits: %d acquisitions in %lld ms; "
                  "high-water %lld, violations %lld, done %lld\n",
                  PROCS, THREADS, PERMITS, total, (long long)took, high, violations, done);
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(statuses[i], 0);
    }
    assert_int_equal(violations, 0);
    assert_int_equal(high, PERMITS);
    assert_int_equal(done, total);
    assert_int_equal(rlock_semaphore_available(s), PERMITS);
    assert_int_equal(rh_cmd_int(g_srv, zcard), 0);
    sc_close(s, c);
    rh_free(g_srv);
}

TC_MAIN(tc_require_server, NULL, cmocka_unit_test(test_at_most_n_inside))
