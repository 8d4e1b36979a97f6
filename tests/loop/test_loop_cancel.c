/*
 * A cancellation storm on a loop client (tl_loop.h: libuv or libevent) against a real
 * redis-server: waiters of four kinds (reentrant, fair and write locks, a semaphore of one
 * permit) on two names each, behind a threaded client's holds, each with a token of its own. A
 * thread fires the tokens at random moments while the holds are released, so cancellations race
 * grants, hand-offs and queue leaves. Every done runs exactly once, with RLOCK_OK or
 * RLOCK_ECANCELED; a name never has two holders at once (a grant is released at once by its done,
 * and none comes before the holder sent its release);
 * afterwards no lock, queue entry, waiting writer or taken permit is left on Redis and no
 * channel is listened to.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "rlock_async.h"
#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

#define CS_KINDS   4 /* reentrant, fair, write, semaphore */
#define CS_NAMES   2
#define CS_PER     20 /* waiters per kind and name */
#define CS_WAITERS (CS_KINDS * CS_NAMES * CS_PER)

typedef struct cs_run cs_run;

typedef struct cs_waiter {
    cs_run *run;
    int kind, name;
    rlock_owner *owner;
    rlock_cancel *tok;
    int calls, rc, released;
} cs_waiter;

struct cs_run {
    rlock *locks[CS_KINDS - 1][CS_NAMES];
    rlock_semaphore *sems[CS_NAMES];
    int holder[CS_KINDS][CS_NAMES]; /* the waiter holding, -1: none */
    cs_waiter w[CS_WAITERS];
    int ended;    /* waiters whose done ran */
    int releases; /* grants given back */
    int granted;  /* grants */
    int overlaps; /* a grant while another waiter held the name (its release not sent) */
    int bad;      /* a done ran twice, or with another code */
};

static const rlock_kind cs_lock_kinds[CS_KINDS - 1] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_WRITE};

static void cs_released(cs_waiter *w, int rc)
{
    cs_run *run = w->run;
    run->bad += rc != RLOCK_OK;
    run->releases++;
}

static void cs_unlock_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    cs_released(user_data, rc);
}

static void cs_release_done(rlock_semaphore *sem, int rc, void *user_data)
{
    (void)sem;
    cs_released(user_data, rc);
}

/* A grant: checked against the name's holder, then given back at once. */
static void cs_granted(cs_waiter *w)
{
    cs_run *run = w->run;
    int *holder = &run->holder[w->kind][w->name];
    run->overlaps += *holder != -1;
    *holder = (int)(w - run->w);
    run->granted++;
    int r = w->kind < CS_KINDS - 1
                ? rlock_unlock_async(run->locks[w->kind][w->name], w->owner, cs_unlock_done, w)
                : rlock_semaphore_release_async(run->sems[w->name], 1, cs_release_done, w);
    /* The name is free once the release is sent: a release that grants the lock to the next
     * waiter publishes the grant before it replies, and the two come on two connections, so
     * the next waiter's done may run before this unlock's. */
    *holder = -1;
    if (r != RLOCK_OK) {
        run->bad++;
        cs_released(w, RLOCK_OK);
    }
}

static void cs_ended(cs_waiter *w, int rc)
{
    w->calls++;
    w->rc = rc;
    w->run->ended++;
    w->run->bad += w->calls != 1 || (rc != RLOCK_OK && rc != RLOCK_ECANCELED);
    if (rc == RLOCK_OK && w->calls == 1) {
        cs_granted(w);
    }
}

static void cs_lock_done(rlock *lock, int rc, void *user_data)
{
    (void)lock;
    cs_ended(user_data, rc);
}

static void cs_sem_done(rlock_semaphore *sem, int rc, void *user_data)
{
    (void)sem;
    cs_ended(user_data, rc);
}

static int cs_start(cs_waiter *w)
{
    cs_run *run = w->run;
    if (w->kind == CS_KINDS - 1) {
        return rlock_semaphore_acquire_async(run->sems[w->name], 1, 10000, w->tok, cs_sem_done, w);
    }
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = w->owner;
    a.wait_ms = 10000;
    a.lease_ms = -1;
    a.cancel = w->tok;
    return rlock_lock_async(run->locks[w->kind][w->name], &a, cs_lock_done, w);
}

/* The storm: every token fired, in a random order, over about 300 ms. */
static void *cs_fire_all(void *arg)
{
    cs_run *run = arg;
    int order[CS_WAITERS];
    for (int i = 0; i < CS_WAITERS; i++) {
        order[i] = i;
    }
    unsigned seed = (unsigned)time(NULL);
    for (int i = CS_WAITERS - 1; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < CS_WAITERS; i++) {
        if (i % 8 == 0) {
            usleep((useconds_t)(rand_r(&seed) % 15000));
        }
        rlock_cancel_fire(run->w[order[i]].tok);
    }
    return NULL;
}

typedef struct cs_holds {
    rlock *locks[CS_KINDS - 1][CS_NAMES];
    rlock_semaphore *sems[CS_NAMES];
} cs_holds;

/* The threaded holds go, from the loop's thread, while the storm runs. */
static void cs_release_holds(void *arg)
{
    cs_holds *h = arg;
    for (int n = 0; n < CS_NAMES; n++) {
        for (int k = 0; k < CS_KINDS - 1; k++) {
            assert_int_equal(rlock_unlock(h->locks[k][n]), RLOCK_OK);
        }
        assert_int_equal(rlock_semaphore_release(h->sems[n], 1), RLOCK_OK);
    }
}

static const char *const cs_names[CS_NAMES] = {"loop-storm-a", "loop-storm-b"};

static void cs_name(char *buf, size_t n, int kind, int name)
{
    static const char *const kinds[CS_KINDS] = {"re", "fair", "rw", "sem"};
    snprintf(buf, n, "%s-%s", cs_names[name], kinds[kind]);
}

/* The threaded client takes every lock and the one permit of every semaphore. */
static void cs_hold_all(rlock_client *t, cs_holds *h)
{
    char name[64];
    for (int n = 0; n < CS_NAMES; n++) {
        for (int k = 0; k < CS_KINDS - 1; k++) {
            cs_name(name, sizeof(name), k, n);
            h->locks[k][n] = tc_open(t, cs_lock_kinds[k], name);
            assert_int_equal(rlock_lock(h->locks[k][n], -1), RLOCK_OK);
        }
        cs_name(name, sizeof(name), CS_KINDS - 1, n);
        h->sems[n] = rlock_semaphore_open(t, name);
        assert_non_null(h->sems[n]);
        assert_int_equal(rlock_semaphore_try_set_permits(h->sems[n], 1), 1);
        assert_int_equal(rlock_semaphore_acquire(h->sems[n], 1, 0), RLOCK_OK);
    }
}

/* Nothing held, queued or taken is left, and no channel is listened to. */
static void cs_check_clean(rh_server *s)
{
    char name[64], key[96];
    for (int n = 0; n < CS_NAMES; n++) {
        for (int k = 0; k < CS_KINDS - 1; k++) {
            cs_name(name, sizeof(name), k, n);
            const char *exists[] = {"EXISTS", name, NULL};
            assert_int_equal(rh_cmd_int(s, exists), 0);
        }
        cs_name(name, sizeof(name), 1, n);
        snprintf(key, sizeof(key), "redisson_lock_queue:{%s}", name);
        const char *queue[] = {"LLEN", key, NULL};
        assert_int_equal(rh_cmd_int(s, queue), 0);
        cs_name(name, sizeof(name), CS_KINDS - 1, n);
        const char *get[] = {"GET", name, NULL};
        char *v = rh_cmd_str(s, get);
        assert_non_null(v);
        assert_string_equal(v, "1"); /* every permit back */
        free(v);
    }
    const char *chans[] = {"PUBSUB", "CHANNELS", NULL};
    int64_t deadline = tl_now_ms() + 3000;
    for (;;) {
        redisReply *r = rh_cmd(s, chans);
        assert_non_null(r);
        size_t listened = r->type == REDIS_REPLY_ARRAY ? r->elements : 1;
        freeReplyObject(r);
        const char *numpat[] = {"PUBSUB", "NUMPAT", NULL};
        if ((listened == 0 && rh_cmd_int(s, numpat) == 0) || tl_now_ms() > deadline) {
            assert_int_equal(listened, 0);
            assert_int_equal(rh_cmd_int(s, numpat), 0);
            break;
        }
        rh_sleep_ms(20);
    }
}

static void cs_open(cs_run *run, rlock_client *c)
{
    char name[64];
    for (int n = 0; n < CS_NAMES; n++) {
        for (int k = 0; k < CS_KINDS - 1; k++) {
            cs_name(name, sizeof(name), k, n);
            run->locks[k][n] = tc_open(c, cs_lock_kinds[k], name);
        }
        cs_name(name, sizeof(name), CS_KINDS - 1, n);
        run->sems[n] = rlock_semaphore_open(c, name);
        assert_non_null(run->sems[n]);
    }
    for (int i = 0; i < CS_WAITERS; i++) {
        cs_waiter *w = &run->w[i];
        *w = (cs_waiter){.run = run, .kind = i % CS_KINDS, .name = (i / CS_KINDS) % CS_NAMES};
        w->owner = tl_owner(c);
        assert_int_equal(rlock_cancel_new(&w->tok), RLOCK_OK);
    }
    memset(run->holder, 0xff, sizeof(run->holder));
}

static void test_storm(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options o;
    tc_options(&o, s);
    rlock_client *t = tc_client(&o), *c = tl_client(l, &o);
    cs_holds h;
    cs_hold_all(t, &h);
    cs_run *run = calloc(1, sizeof(*run));
    assert_non_null(run);
    cs_open(run, c);
    for (int i = 0; i < CS_WAITERS; i++) {
        assert_int_equal(cs_start(&run->w[i]), RLOCK_OK);
    }
    tl_run_for(l, 100); /* every waiter asleep, queued or recorded */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cs_fire_all, run), 0);
    tu_after(l, 40, cs_release_holds, &h);
    int ok = tu_run_until(l, &run->ended, CS_WAITERS, 15000);
    assert_int_equal(pthread_join(th, NULL), 0);
    ok = ok && tu_run_until(l, &run->releases, run->granted, 5000);
    tl_run_for(l, 50);
    print_message("storm: %d waiters, %d granted, %d cancelled\n", CS_WAITERS, run->granted,
                  run->ended - run->granted);
    assert_true(ok);
    assert_int_equal(run->bad, 0);
    assert_int_equal(run->overlaps, 0);
    assert_int_equal(run->ended, CS_WAITERS);
    for (int i = 0; i < CS_WAITERS; i++) {
        rlock_owner_free(run->w[i].owner);
        rlock_cancel_free(run->w[i].tok);
    }
    for (int n = 0; n < CS_NAMES; n++) {
        for (int k = 0; k < CS_KINDS - 1; k++) {
            rlock_free(run->locks[k][n]);
            rlock_free(h.locks[k][n]);
        }
        rlock_semaphore_free(run->sems[n]);
        rlock_semaphore_free(h.sems[n]);
    }
    rlock_client_free(c);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
    cs_check_clean(s);
    free(run);
}

static int setup(void **state)
{
    rh_skip_if_unavailable();
    *state = rh_start(NULL);
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    rh_free(*state);
    return 0;
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_storm))
