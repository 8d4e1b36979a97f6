/*
 * The fair lock under faults, against a real redis-server:
 *  - Crash: a process with 3 queued waiters in the middle of a 10-waiter queue is SIGKILLed; its
 *    waiters leave the list and the zset within waiter_timeout + one heartbeat period (+ slack),
 *    while the lock stays held, and the others then acquire in order.
 *  - Crash of the next waiter while the lock is handed on: the waiter behind it gets the lock
 *    within the same bound (Redisson stalled for the dead waiter's whole 5-minute wait).
 *  - Give-up in the middle: a waiter whose wait elapses is out of the list and the zset when
 *    try_lock returns, and the others keep their order.
 *  - Redisson #5019: CLIENT PAUSE WRITE during a wait makes the attempt fail; the waiter still
 *    leaves no queue entry behind when try_lock returns.
 *  - Redisson's drift scenarios, adapted: under churn (short try_locks, a killed waiter process,
 *    a force unlock) no zset score is ever later than server now + waiter_timeout.
 * The waiter timeout is 1000-1500 ms here (default 5000) to keep the run short.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "lock.h"

#define WT 1500 /* waiter timeout of the worker children, ms */

static rh_server *g_srv;
static rlock_client *g_client;

TC_FIXTURE(g_srv, g_client, NULL)

/* Forks three worker children queued on name as their slot lists say (waiter indices, comma
 * separated), takes the lock first on the group's client and waits until all n of their waiters
 * joined the queue in order. */
static rlock *queue_children(const char *name, int n, pid_t pid[3], const char *slots0,
                             const char *slots1, const char *slots2)
{
    const char *const slots[3] = {slots0, slots1, slots2};
    for (int i = 0; i < 3; i++) {
        pid[i] = fc_spawn_child(g_srv, name, WT, 1, slots[i]);
        assert_true(pid[i] > 0);
    }
    rlock *l = tc_hold(g_client, RLOCK_FAIR, name);
    assert_int_equal(fc_join_in_order(g_srv, name, 0, n), 0);
    return l;
}

/* The two surviving children (first and last) finish cleanly and leave no queue behind. */
static void survivors_finish(rlock *l, const char *name, const pid_t pid[3])
{
    assert_int_equal(rh_wait_child(pid[0], 10000), 0);
    assert_int_equal(rh_wait_child(pid[2], 10000), 0);
    FC_ASSERT_NO_WAITERS(g_srv, name);
    rlock_free(l);
}

static void test_crash_middle_waiters(void **state)
{
    (void)state;
    const char *name = "fair:crash";
    pid_t pid[3];
    rlock *l = queue_children(name, 10, pid, "0,1,2", "3,4,5", "6,7,8,9");
    char *q[16];
    assert_int_equal(fc_lrange(g_srv, "redisson_lock_queue:{fair:crash}", q, 16), 10);
    assert_int_equal(fc_zcard(g_srv, name), 10);

    int64_t killed = rh_now_ms();
    assert_int_equal(kill(pid[1], SIGKILL), 0);
    assert_int_equal(rh_wait_child(pid[1], 5000), 128 + SIGKILL);
    int gone = 0;
    while (!gone && rh_now_ms() - killed < 5000) {
        rh_sleep_ms(20);
        gone = 1;
        for (int i = 3; i <= 5; i++) {
            gone &= fc_in_queue(g_srv, name, q[i]) == 0 && fc_in_zset(g_srv, name, q[i]) == 0;
        }
    }
    int64_t took = rh_now_ms() - killed;
    print_message("dead waiters 3..5 left list and zset %lld ms after SIGKILL (bound %d ms)\n",
                  (long long)took, WT + WT / 3 + 500);
    assert_true(gone);
    assert_true(took <= WT + WT / 3 + 500);
    /* The survivors are untouched and still in join order. */
    char *rest[16];
    assert_int_equal(fc_lrange(g_srv, "redisson_lock_queue:{fair:crash}", rest, 16), 7);
    static const int survivors[] = {0, 1, 2, 6, 7, 8, 9};
    for (int i = 0; i < 7; i++) {
        assert_string_equal(rest[i], q[survivors[i]]);
    }
    fc_free_strings(rest, 7);
    fc_free_strings(q, 10);

    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int order[FC_MAX_WAITERS];
    assert_int_equal(fc_read_order(g_srv, name, 0, 7, order, 10000), 7);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(order[i], survivors[i]);
    }
    survivors_finish(l, name, pid);
}

/* The next waiter dies just before the hand-off reaches it: the hand-off is sent to a dead
 * channel, and the waiter behind it must not wait for anything longer than the liveness bound. */
static void test_crash_next_in_line(void **state)
{
    (void)state;
    const char *name = "fair:crash-next";
    pid_t pid[3];
    rlock *l = queue_children(name, 3, pid, "0", "1", "2");
    int64_t killed = rh_now_ms();
    assert_int_equal(kill(pid[1], SIGKILL), 0);
    assert_int_equal(rh_wait_child(pid[1], 5000), 128 + SIGKILL);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int order[FC_MAX_WAITERS];
    assert_int_equal(fc_read_order(g_srv, name, 0, 2, order, 10000), 2);
    int64_t took = rh_now_ms() - killed;
    print_message("waiter behind a dead one got the lock %lld ms after the kill (bound %d ms)\n",
                  (long long)took, WT + WT / 3 + 500);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 2);
    assert_true(took <= WT + WT / 3 + 500);
    survivors_finish(l, name, pid);
}

/* ---- give-up ------------------------------------------------------------------------------ */

typedef struct waiter {
    rlock *l;
    int64_t wait_ms; /* < 0: rlock_lock */
    int64_t command_timeout_ms;
    atomic_int go;
    int rc;
    int64_t returned_at;
    char owner[RLK_OWNER_MAX];
    int slot;
} waiter;

static atomic_int g_slot;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    fc_owner(w->l->client, w->owner);
    while (!atomic_load(&w->go)) {
        rh_sleep_ms(1);
    }
    w->rc = w->wait_ms < 0 ? rlock_lock(w->l, -1) : rlock_try_lock(w->l, w->wait_ms, 5000);
    w->returned_at = rh_now_ms();
    if (w->rc == RLOCK_OK) {
        w->slot = atomic_fetch_add(&g_slot, 1);
        rlock_unlock(w->l);
    }
    return NULL;
}

static void test_give_up_in_the_middle(void **state)
{
    (void)state;
    const char *name = "fair:giveup";
    rlock *l = tc_hold(g_client, RLOCK_FAIR, name);
    waiter w[3];
    pthread_t t[3];
    atomic_store(&g_slot, 0);
    for (int i = 0; i < 3; i++) {
        w[i].l = l;
        w[i].wait_ms = i == 1 ? 600 : -1;
        atomic_init(&w[i].go, 0);
        w[i].rc = -1000;
        w[i].slot = -1;
        assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        atomic_store(&w[i].go, 1);
        assert_int_equal(fc_wait_llen(g_srv, name, i + 1, 5000), 0);
    }
    pthread_join(t[1], NULL);
    assert_int_equal(w[1].rc, RLOCK_ETIMEDOUT);
    /* Checked right after the give-up returned: out of both, the others in order. */
    assert_int_equal(fc_in_queue(g_srv, name, w[1].owner), 0);
    assert_int_equal(fc_in_zset(g_srv, name, w[1].owner), 0);
    char *q[4];
    assert_int_equal(fc_lrange(g_srv, "redisson_lock_queue:{fair:giveup}", q, 4), 2);
    assert_string_equal(q[0], w[0].owner);
    assert_string_equal(q[1], w[2].owner);
    fc_free_strings(q, 2);
    assert_int_equal(fc_zcard(g_srv, name), 2);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    pthread_join(t[0], NULL);
    pthread_join(t[2], NULL);
    assert_int_equal(w[0].rc, RLOCK_OK);
    assert_int_equal(w[2].rc, RLOCK_OK);
    assert_int_equal(w[0].slot, 0);
    assert_int_equal(w[2].slot, 1);
    FC_ASSERT_NO_WAITERS(g_srv, name);
    rlock_free(l);
}

/* Redisson's testAcquireFailedNotCalledOnRedisTimeout (#5019): the holder's 1.5 s lease runs out
 * during a 4 s CLIENT PAUSE WRITE, so the waiter's next attempt cannot run and times out (1 s
 * command timeout). The waiter must still be out of the queue when try_lock returns. */
static void test_client_pause_write(void **state)
{
    (void)state;
    const char *name = "fair:pause";
    rlock_client *wc = fc_client_ex(rh_port(g_srv), 5000, 1000);
    assert_non_null(wc);
    rlock *hl = rlock_open(g_client, RLOCK_FAIR, name);
    rlock *wl = rlock_open(wc, RLOCK_FAIR, name);
    assert_int_equal(rlock_lock(hl, 1500), RLOCK_OK);
    waiter w;
    w.l = wl;
    w.wait_ms = 20000;
    atomic_init(&w.go, 1);
    w.rc = -1000;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    assert_int_equal(fc_wait_llen(g_srv, name, 1, 5000), 0);
    const char *pause[] = {"CLIENT", "PAUSE", "4000", "WRITE", NULL};
    char *ok = rh_cmd_str(g_srv, pause);
    assert_non_null(ok);
    free(ok);
    int64_t paused = rh_now_ms();
    pthread_join(t, NULL);
    int64_t took = w.returned_at - paused;
    /* The pause is over now; look at the queue at once. */
    int in_queue = fc_in_queue(g_srv, name, w.owner);
    int in_zset = fc_in_zset(g_srv, name, w.owner);
    print_message("try_lock during CLIENT PAUSE WRITE: %s (%s) after %lld ms; queued: %d/%d\n",
                  rlock_strerror(w.rc), w.rc == RLOCK_OK ? "" : "expected failure", (long long)took,
                  in_queue, in_zset);
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    free(rh_cmd_str(g_srv, unpause));
    assert_int_equal(in_queue, 0);
    assert_int_equal(in_zset, 0);
    if (w.rc != RLOCK_OK) {
        assert_int_equal(w.rc, RLOCK_ECONN);
        /* The leave waited for the pause to end instead of leaving the entry behind. */
        assert_true(took >= 3900);
    }
    FC_ASSERT_NO_WAITERS(g_srv, name);
    rlock_free(hl);
    rlock_free(wl);
    rlock_client_free(wc);
}

/* ---- drift -------------------------------------------------------------------------------- */

static atomic_int g_stop;

typedef struct churner {
    rlock *l;
    unsigned seed;
    int acquired, timed_out, lost, errors;
} churner;

static void *churn_main(void *arg)
{
    churner *c = arg;
    while (!atomic_load(&g_stop)) {
        int64_t wait = 10 + rand_r(&c->seed) % 120;
        int rc = rlock_try_lock(c->l, wait, 30000);
        if (rc == RLOCK_OK) {
            c->acquired++;
            rh_sleep_ms(20 + rand_r(&c->seed) % 40);
            rc = rlock_unlock(c->l);
            /* The force unlock may take the lock from under a churner: its unlock says so. */
            c->lost += rc == RLOCK_ELOST;
            c->errors += rc != RLOCK_OK && rc != RLOCK_ELOST;
        } else if (rc == RLOCK_ETIMEDOUT) {
            c->timed_out++;
        } else {
            c->errors++;
        }
    }
    return NULL;
}

/* The largest (score - server now) over the zset, or INT64_MIN if it is empty. The clock is read
 * after the zset, so a deadline written in between cannot look later than it is. */
static int64_t max_excess(const char *zset)
{
    const char *argv[] = {"ZRANGE", zset, "-1", "-1", "WITHSCORES", NULL};
    redisReply *r = rh_cmd(g_srv, argv);
    int64_t now = fc_server_now(g_srv);
    int64_t v = INT64_MIN;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && now > 0) {
        v = strtoll(r->element[1]->str, NULL, 10) - now;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return v;
}

static void test_no_deadline_creep(void **state)
{
    (void)state;
    enum { CHURNERS = 3, WTD = 1000 };
    const char *name = "fair:drift";
    const char *zset = "redisson_lock_timeout:{fair:drift}";
    pid_t doomed = fc_spawn_child(g_srv, name, WTD, 1, "0,1");
    assert_true(doomed > 0);
    rlock_client *cc = fc_client(g_srv, WTD);
    assert_non_null(cc);
    rlock *l = rlock_open(cc, RLOCK_FAIR, name);
    churner c[CHURNERS];
    pthread_t t[CHURNERS];
    atomic_store(&g_stop, 0);
    for (int i = 0; i < CHURNERS; i++) {
        c[i] = (churner){l, 7u + (unsigned)i, 0, 0, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, churn_main, &c[i]), 0);
    }
    int64_t worst = INT64_MIN;
    int samples = 0;
    int64_t t0 = rh_now_ms();
    int signalled = 0, killed = 0, forced = 0;
    while (rh_now_ms() - t0 < 3500) {
        int64_t e = max_excess(zset);
        worst = e > worst ? e : worst;
        samples += e != INT64_MIN;
        int64_t at = rh_now_ms() - t0;
        if (!signalled && at > 500) {
            signalled = fc_signal(g_srv, name, 0, 0) == 0 && fc_signal(g_srv, name, 0, 1) == 0;
        } else if (!killed && at > 1200) {
            killed = kill(doomed, SIGKILL) == 0;
        } else if (!forced && at > 2000) {
            forced = rlock_force_unlock(l) >= 0;
        }
        rh_sleep_ms(10);
    }
    atomic_store(&g_stop, 1);
    int acquired = 0, timed_out = 0, lost = 0, errors = 0;
    for (int i = 0; i < CHURNERS; i++) {
        pthread_join(t[i], NULL);
        acquired += c[i].acquired;
        timed_out += c[i].timed_out;
        lost += c[i].lost;
        errors += c[i].errors;
    }
    rh_wait_child(doomed, 5000);
    print_message("churn: %d acquired, %d timed out, %d lost to the force unlock, %d errors; "
                  "%d zset samples, latest deadline at most %lld ms after server now (waiter "
                  "timeout %d)\n",
                  acquired, timed_out, lost, errors, samples, (long long)worst, WTD);
    assert_true(signalled && killed && forced);
    assert_true(acquired > 0 && timed_out > 0);
    assert_int_equal(errors, 0);
    assert_true(lost <= 1);
    assert_true(samples > 10);
    assert_true(worst <= WTD + 5);
    /* With nobody left waiting, the dead child's entries are purged by the next attempt (once
     * their deadlines have passed) and nothing is left behind. */
    rh_sleep_ms(WTD + 100);
    assert_int_equal(rlock_try_lock(l, 0, 1000), RLOCK_OK);
    FC_ASSERT_NO_WAITERS(g_srv, name);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(cc);
}

FC_MAIN(setup, teardown, cmocka_unit_test(test_crash_middle_waiters),
        cmocka_unit_test(test_crash_next_in_line), cmocka_unit_test(test_give_up_in_the_middle),
        cmocka_unit_test(test_client_pause_write), cmocka_unit_test(test_no_deadline_creep))
