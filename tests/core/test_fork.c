/*
 * A client used on both sides of fork() (issue 17, point 1). The parent creates a client, opens
 * handles and takes holds, then forks; the child uses the very same client and handles. Each test
 * is one symptom of sharing the parent's identity, sockets and (missing) threads:
 *   - the child must not re-enter the parent's hold;
 *   - parent and child must not read each other's replies;
 *   - the child's waiters must be woken and its watchdog must renew;
 *   - rlock_client_free() in the child must return;
 *   - parent and child stress-locking one name must exclude each other (independent checker);
 *   - and all of it again one generation down (a grandchild).
 * A child reports through its exit status (0 = as expected), after printing what went wrong.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_stress.h"
#include "tc_thread.h"

static rh_server *srv;
static rlock_client *client;
TC_FIXTURE(srv, client, NULL)

/* Fails the child (exit status line) with a message when cond is false. */
#define CHILD_CHECK(cond, code)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child %d: %s failed (%s)\n", (int)getpid(), #cond,                    \
                    rlock_last_error());                                                           \
            return (code);                                                                         \
        }                                                                                          \
    } while (0)

/* Forks a child running fn(arg) and asserts that it exited 0 within 60 s. */
static void run_child(int (*fn)(void *), void *arg)
{
    pid_t pid = rh_fork_child(fn, arg);
    assert_true(pid > 0);
    assert_int_equal(rh_wait_child(pid, 60000), 0);
}

static rlock *open_lock(rlock_client *c, const char *name)
{
    rlock *l = tc_open(c, RLOCK_REENTRANT, name);
    return l;
}

/* ---- (a) no re-entry of the parent's hold ------------------------------------------------ */

typedef struct reenter_arg {
    rlock *held;            /* held by the parent (and, with a grandchild, by the child) */
    rlock *held2;           /* NULL, or a second lock held by the forking process */
    char ancestor_ids[160]; /* ids of every ancestor, space-separated (a copy: the client's
                             * own id changes in the child) */
} reenter_arg;

/* The child's side of a lock its ancestors hold: busy, not held, not its to unlock. */
static int child_sees_foreign(rlock *l)
{
    CHILD_CHECK(rlock_try_lock(l, 0, -1) == RLOCK_ETIMEDOUT, 10);
    CHILD_CHECK(rlock_is_held(l) == 0, 11);
    CHILD_CHECK(rlock_token(l) == 0, 12);
    CHILD_CHECK(rlock_unlock(l) == RLOCK_ENOTOWNER, 13);
    CHILD_CHECK(rlock_hold_count(l) == 0, 14);
    return 0;
}

static int child_reenter(void *p)
{
    reenter_arg *a = p;
    int r = child_sees_foreign(a->held);
    r = r ? r : a->held2 != NULL ? child_sees_foreign(a->held2) : 0;
    if (r != 0) {
        return r;
    }
    const char *id = rlock_client_id(client);
    CHILD_CHECK(id[0] != '\0' && strstr(a->ancestor_ids, id) == NULL, 15);
    return 0;
}

/* The parent's hold on l: still one hold in Redis (no re-entry counted) and still its own. */
static void assert_parent_hold(rlock *l, const char *name)
{
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_true(rlock_token(l) != 0);
    const char *hlen[] = {"HLEN", name, NULL};
    assert_int_equal(rh_cmd_int(srv, hlen), 1);
}

/* The parent holds name, runs child (a reenter_arg), and finds its hold as it was. */
static void with_parent_hold(const char *name, int (*child)(void *))
{
    rlock *l = open_lock(client, name);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    reenter_arg a = {.held = l};
    snprintf(a.ancestor_ids, sizeof(a.ancestor_ids), "%s", rlock_client_id(client));
    run_child(child, &a);
    assert_parent_hold(l, name);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

static void test_child_cannot_reenter(void **state)
{
    (void)state;
    with_parent_hold("fork:reenter", child_reenter);
}

/* ---- (b) no cross-talk on the inherited connections ----------------------------------------- */

#define HAMMER_MS 1000

/* Runs hold_count and is_locked on two locks with known answers for HAMMER_MS; returns the
 * number of wrong answers (a reply read by the wrong process shows up as one). */
static long hammer(rlock *mine, int count, rlock *free_lock)
{
    long wrong = 0;
    int64_t end = rh_now_ms() + HAMMER_MS;
    while (rh_now_ms() < end) {
        int n = rlock_hold_count(mine);
        int f = rlock_is_locked(free_lock);
        if (n != count || f != 0) {
            if (wrong++ < 3) {
                fprintf(stderr, "pid %d: hold_count %d (want %d), is_locked %d: %s\n",
                        (int)getpid(), n, count, f, rlock_last_error());
            }
        }
    }
    return wrong;
}

typedef struct hammer_arg {
    rlock *child_lock, *free_lock;
} hammer_arg;

static int child_hammer(void *p)
{
    hammer_arg *a = p;
    for (int i = 0; i < 3; i++) {
        CHILD_CHECK(rlock_lock(a->child_lock, 60000) == RLOCK_OK, 20);
    }
    long wrong = hammer(a->child_lock, 3, a->free_lock);
    CHILD_CHECK(wrong == 0, 21);
    for (int i = 0; i < 3; i++) {
        CHILD_CHECK(rlock_unlock(a->child_lock) == RLOCK_OK, 22);
    }
    return 0;
}

static void test_no_cross_talk(void **state)
{
    (void)state;
    rlock *mine = open_lock(client, "fork:talk:parent");
    hammer_arg a = {open_lock(client, "fork:talk:child"), open_lock(client, "fork:talk:free")};
    assert_int_equal(rlock_lock(mine, 60000), RLOCK_OK);
    assert_int_equal(rlock_lock(mine, 60000), RLOCK_OK);
    pid_t pid = rh_fork_child(child_hammer, &a);
    assert_true(pid > 0);
    long wrong = hammer(mine, 2, a.free_lock);
    assert_int_equal(rh_wait_child(pid, 60000), 0);
    assert_int_equal(wrong, 0);
    assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    rlock_free(mine);
    rlock_free(a.child_lock);
    rlock_free(a.free_lock);
}

/* ---- (c) the child's subscriber and watchdog -------------------------------------------- */

/* The watchdog period. A renewal runs every WD_MS / 3, so the hold expires only if one is more
 * than two thirds of a period late: 1 s gave ASan builds on a loaded 2-core machine an
 * occasional late renewal (CI), 2 s keeps what the case shows with room for that. */
#define WD_MS 2000

typedef struct wake_arg {
    rlock *l;
} wake_arg;

static int child_waits_then_renews(void *p)
{
    wake_arg *a = p;
    /* The parent's lease (60 s) outlasts this wait: only the release's message, through the
     * child's own subscriber, can end it with the lock. */
    CHILD_CHECK(rlock_try_lock(a->l, 10000, -1) == RLOCK_OK, 30);
    /* Three watchdog periods: the key lives on only if the child's watchdog renews it. */
    rh_sleep_ms(3 * WD_MS);
    CHILD_CHECK(rlock_is_held(a->l) == 1, 31);
    /* RLOCK_OK, not RLOCK_ELOST: the watchdog never judged the hold lost. */
    CHILD_CHECK(rlock_unlock(a->l) == RLOCK_OK, 33);
    return 0;
}

static void test_child_waiter_and_watchdog(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, srv);
    o.watchdog_timeout_ms = WD_MS;
    rlock_client *c = tc_client(&o);
    rlock *l = open_lock(c, "fork:wake");
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    wake_arg a = {l};
    pid_t pid = rh_fork_child(child_waits_then_renews, &a);
    assert_true(pid > 0);
    /* Released once the child listens on the channel (its subscriber is up), or after 5 s: a
     * child without a subscriber then sleeps to its wait's end and fails. */
    for (int64_t end = rh_now_ms() + 5000; rh_now_ms() < end; rh_sleep_ms(10)) {
        if (tc_listeners(srv, "redisson_lock__channel:{fork:wake}") > 0) {
            break;
        }
    }
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rh_wait_child(pid, 60000), 0);
    /* The parent's own threads were left alone: its waiter wakes and its watchdog renews. */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    rh_sleep_ms(3 * WD_MS);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- (d) rlock_client_free() in the child ------------------------------------------------ */

/* A client of the child's own that it frees: before using it (inherited threads, not
 * refreshed) and after (its own threads). alarm() turns a hang into a failure. */
static int child_frees(void *p)
{
    int use_first = *(int *)p;
    alarm(20);
    if (use_first) {
        CHILD_CHECK(rlock_is_locked(rlock_open(client, RLOCK_REENTRANT, "fork:free")) == 0, 40);
    }
    rlock_client_free(client);
    return 0;
}

static void test_child_free_returns(void **state)
{
    (void)state;
    rlock *l = open_lock(client, "fork:free:held");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    for (int use_first = 0; use_first < 2; use_first++) {
        run_child(child_frees, &use_first);
        /* The child wrote nothing on the parent's connections: they still work, and so do the
         * parent's subscriber and watchdog. */
        assert_int_equal(rlock_is_held(l), 1);
        assert_int_equal(rlock_hold_count(l), 1);
    }
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* ---- (e) parent and child stress-lock one name ------------------------------------------- */

static tc_proc *shared_proc; /* the parent's client and handle, inherited by the child */

static void *inherited_proc(int proc, void *arg)
{
    (void)proc;
    (void)arg;
    return shared_proc;
}

static void *parent_worker(void *p)
{
    tc_worker *w = p;
    for (long i = 0; i < 200; i++) {
        w->errors += tc_step_exclusive(w, i) != TC_STEP_OK;
    }
    return NULL;
}

static void test_parent_child_stress(void **state)
{
    (void)state;
    tc_handles hs = {.srv = srv, .n = 1, .type = {RLOCK_REENTRANT}, .name = {"fork:stress"}};
    shared_proc = tc_proc_open(0, &hs);
    assert_non_null(shared_proc);
    /* One handle, one client, two processes: the child's threads get the same thread ids as the
     * parent's (the counter is copied by fork()), so only the child's new identity keeps them
     * apart. */
    tc_stress_spec spec = {.procs = 1,
                           .threads = 2,
                           .iters = 200,
                           .proc_init = inherited_proc,
                           .proc_fini = tc_proc_close,
                           .step = tc_step_exclusive,
                           .timeout_ms = 60000};
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_worker w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (tc_worker){.proc = 1, .thread = i, .proc_ctx = shared_proc, .mx = tc_stress_mx(st)};
        assert_int_equal(pthread_create(&t[i], NULL, parent_worker, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    tc_stress_result res;
    tc_stress_wait(st, &res);
    tc_stress_report rep;
    tc_stress_snapshot(st, &res, &rep);
    tc_stress_free(st);
    printf("parent+child stress: %ld child sections, 2 x 200 parent sections, %ld violations\n",
           res.iterations, rep.violations);
    assert_int_equal(w[0].errors + w[1].errors, 0);
    tc_assert_clean(&rep);
    assert_int_equal(rep.entries[0], res.iterations + 400);
    tc_proc_close(shared_proc);
    shared_proc = NULL;
}

/* ---- the parent, forking while its threads work ------------------------------------------ */

static int child_does_nothing(void *p)
{
    (void)p;
    return 0;
}

typedef struct busy_arg {
    rlock *l;
    atomic_int stop;
    atomic_long errors;
} busy_arg;

/* Keeps the pool, the subscriber and the watchdog busy: a watchdog hold of l, given up and taken
 * again (its wait goes through the subscriber) while the main thread forks. */
static int busy_worker(void *p)
{
    busy_arg *b = p;
    while (!atomic_load(&b->stop)) {
        int wrong = rlock_try_lock(b->l, 5000, -1) != RLOCK_OK;
        wrong += rlock_is_held(b->l) != 1;
        wrong += rlock_unlock(b->l) != RLOCK_OK;
        atomic_fetch_add(&b->errors, wrong);
    }
    return 0;
}

static void test_parent_forks_while_busy(void **state)
{
    (void)state;
    /* The atfork handlers take and give back every client mutex around each fork(), while two
     * threads contend for one lock: nothing may deadlock, fail or (under TSan) race. */
    busy_arg b = {.l = open_lock(client, "fork:busy")};
    tc_bg t[2];
    for (int i = 0; i < 2; i++) {
        tc_bg_start(&t[i], busy_worker, &b);
    }
    for (int i = 0; i < 20; i++) {
        run_child(child_does_nothing, NULL);
        rh_sleep_ms(10);
    }
    atomic_store(&b.stop, 1);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tc_bg_join(&t[i]), 0);
    }
    assert_int_equal(atomic_load(&b.errors), 0);
    rlock_free(b.l);
}

/* ---- groups and semaphores follow the same rule ------------------------------------------ */

typedef struct groups_arg {
    rlock_semaphore *sem;
    rlock *multi, *redlock;
    rlock_latch *latch;
} groups_arg;

static int child_groups(void *p)
{
    groups_arg *a = p;
    char id[RLOCK_PERMIT_ID_LEN + 1];
    /* The parent's leased permit is the parent's: none is left for the child. */
    CHILD_CHECK(rlock_semaphore_acquire_leased(a->sem, 0, 1000, id) == RLOCK_ETIMEDOUT, 60);
    CHILD_CHECK(rlock_semaphore_available(a->sem) == 0, 61);
    for (int i = 0; i < 2; i++) {
        rlock *g = i == 0 ? a->multi : a->redlock;
        CHILD_CHECK(rlock_try_lock(g, 0, -1) == RLOCK_ETIMEDOUT, 62 + 4 * i);
        CHILD_CHECK(rlock_is_held(g) == 0, 63 + 4 * i);
        CHILD_CHECK(rlock_token(g) == 0, 64 + 4 * i);
        CHILD_CHECK(rlock_unlock(g) == RLOCK_ENOTOWNER, 65 + 4 * i);
    }
    /* A latch has nothing per process: the child counts down the parent's latch. */
    CHILD_CHECK(rlock_latch_count(a->latch) == 1, 70);
    CHILD_CHECK(rlock_latch_count_down(a->latch) == RLOCK_OK, 71);
    CHILD_CHECK(rlock_latch_await(a->latch, 1000) == RLOCK_OK, 72);
    /* Freeing the inherited handles forgets the parent's records without touching them. */
    rlock_latch_free(a->latch);
    rlock_semaphore_free(a->sem);
    rlock_free(a->multi);
    rlock_free(a->redlock);
    return 0;
}

static void test_groups_and_semaphore(void **state)
{
    (void)state;
    groups_arg a = {.sem = rlock_semaphore_open(client, "fork:sem"),
                    .latch = rlock_latch_open(client, "fork:latch")};
    assert_non_null(a.sem);
    assert_non_null(a.latch);
    assert_int_equal(rlock_latch_try_set_count(a.latch, 1), 1);
    assert_int_equal(rlock_semaphore_try_set_permits(a.sem, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(a.sem, 0, -1, id), RLOCK_OK);
    rlock *m[2] = {open_lock(client, "fork:m:a"), open_lock(client, "fork:m:b")};
    a.multi = rlock_multi_new(m, 2);
    rlock_client *rc[3];
    rlock *rl[3];
    for (int i = 0; i < 3; i++) {
        rlock_options o;
        tc_options(&o, srv);
        rc[i] = tc_client(&o);
        char name[32];
        snprintf(name, sizeof(name), "fork:rl:%d", i);
        rl[i] = open_lock(rc[i], name);
    }
    a.redlock = rlock_redlock_new(rl, 3);
    assert_non_null(a.multi);
    assert_non_null(a.redlock);
    assert_int_equal(rlock_lock(a.multi, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(a.redlock, -1), RLOCK_OK);
    run_child(child_groups, &a);
    assert_int_equal(rlock_latch_count(a.latch), 0);
    rlock_latch_free(a.latch);
    assert_int_equal(rlock_semaphore_release_leased(a.sem, id), RLOCK_OK);
    assert_int_equal(rlock_unlock(a.multi), RLOCK_OK);
    assert_int_equal(rlock_unlock(a.redlock), RLOCK_OK);
    rlock_semaphore_free(a.sem);
    rlock_free(a.multi);
    rlock_free(a.redlock);
    for (int i = 0; i < 3; i++) {
        rlock_free(rl[i]);
        rlock_client_free(rc[i]);
    }
    rlock_free(m[0]);
    rlock_free(m[1]);
}

/* ---- a grandchild ------------------------------------------------------------------------ */

static int child_forks_again(void *p)
{
    reenter_arg *a = p;
    rlock *own = rlock_open(client, RLOCK_REENTRANT, "fork:gen:child");
    CHILD_CHECK(own != NULL && rlock_lock(own, -1) == RLOCK_OK, 50);
    reenter_arg g = {.held = a->held, .held2 = own};
    const char *id = rlock_client_id(client);
    CHILD_CHECK(strstr(a->ancestor_ids, id) == NULL, 54);
    snprintf(g.ancestor_ids, sizeof(g.ancestor_ids), "%.100s %s", a->ancestor_ids, id);
    pid_t pid = rh_fork_child(child_reenter, &g);
    CHILD_CHECK(pid > 0 && rh_wait_child(pid, 30000) == 0, 51);
    /* The child's own hold and threads are intact after its child ran. */
    CHILD_CHECK(rlock_hold_count(own) == 1, 52);
    rh_sleep_ms(100);
    CHILD_CHECK(rlock_unlock(own) == RLOCK_OK, 53);
    rlock_free(own);
    return 0;
}

static void test_grandchild(void **state)
{
    (void)state;
    with_parent_hold("fork:gen", child_forks_again);
}

int main(int argc, char **argv)
{
    /* --parent-only: the case whose child starts no thread (see tests/cmake/core.cmake). */
    if (argc > 1 && strcmp(argv[1], "--parent-only") == 0) {
        const struct CMUnitTest parent_only[] = {cmocka_unit_test(test_parent_forks_while_busy)};
        return cmocka_run_group_tests(parent_only, setup, teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parent_forks_while_busy),
        cmocka_unit_test(test_child_cannot_reenter),
        cmocka_unit_test(test_no_cross_talk),
        cmocka_unit_test(test_child_waiter_and_watchdog),
        cmocka_unit_test(test_child_free_returns),
        cmocka_unit_test(test_parent_child_stress),
        cmocka_unit_test(test_groups_and_semaphore),
        cmocka_unit_test(test_grandchild),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
