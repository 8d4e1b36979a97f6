/*
 * Acceptance tests of the connection pool against a real redis-server: 16 threads hammer a pool
 * of 4 while an admin connection kills every normal client connection several times; no
 * retried (idempotent) call may fail and the pool must heal. Also the borrow bound: with every
 * connection borrowed, a borrow fails after command_timeout_ms, and a returned connection is
 * handed to a waiting borrower at once. And the liveness check on borrow: a connection the server
 * closed while it sat idle never carries a command that cannot be resent, while one returned
 * moments ago is handed out without the check's system call.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "pool.h"
#include "route.h"
#include "scripts.h"
#include "tc_redis.h"

#define STRESS_THREADS 16
#define STRESS_OPS     1000
#define KILLS          5

typedef struct stress {
    rlock_client *c;
    atomic_long done;     /* operations finished, successful or not */
    atomic_long failures; /* operations that returned an error or a wrong reply */
    pthread_mutex_t mu;
    char first_error[512];
} stress;

typedef struct worker {
    stress *st;
    int id;
} worker;

static void record_failure(stress *st, const char *what, int r)
{
    atomic_fetch_add(&st->failures, 1);
    pthread_mutex_lock(&st->mu);
    if (st->first_error[0] == '\0') {
        snprintf(st->first_error, sizeof(st->first_error), "%s: %d (%s)", what, r,
                 rlock_last_error());
    }
    pthread_mutex_unlock(&st->mu);
}

/* One operation of the mix: PING, the batch renewal script on a shared hash, and a reentrant
 * acquire followed by a force release on the worker's own lock key. Every reply is checked. */
static int one_op(rlock_client *c, int kind, const char *key, const char *owner)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_init(&args);
    redisReply *rep = NULL;
    int r;
    int ok = 0;
    switch (kind) {
    case 0:
        rlk_args_adds(&args, "PING");
        r = rlk_cmd(c, RLK_IDEMPOTENT, &args, &rep);
        ok = r == RLOCK_OK && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
        break;
    case 1:
        rlk_args_adds(&keys, "pool:shared");
        rlk_args_adds(&args, "600000");
        rlk_args_adds(&args, "f");
        r = rlk_script(c, RLK_SCRIPT_RENEW_HASH, RLK_IDEMPOTENT, &keys, &args, &rep);
        ok = r == RLOCK_OK && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
             rep->element[0]->integer == 1;
        break;
    case 2:
        rlk_args_adds(&keys, key);
        rlk_args_adds(&keys, "pool:token");
        rlk_args_adds(&args, "600000");
        rlk_args_adds(&args, owner);
        r = rlk_script(c, RLK_SCRIPT_LOCK_ACQUIRE, RLK_IDEMPOTENT, &keys, &args, &rep);
        ok = r == RLOCK_OK && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[0]->integer == 1;
        break;
    default:
        rlk_args_adds(&keys, key);
        rlk_args_adds(&keys, "pool:channel");
        rlk_args_adds(&args, "0");
        r = rlk_script(c, RLK_SCRIPT_LOCK_FORCE_RELEASE, RLK_IDEMPOTENT, &keys, &args, &rep);
        ok = r == RLOCK_OK && rep->type == REDIS_REPLY_INTEGER;
        break;
    }
    freeReplyObject(rep);
    return ok ? RLOCK_OK : (r != RLOCK_OK ? r : RLOCK_EPROTO);
}

static void *stress_main(void *arg)
{
    worker *w = arg;
    char key[32], owner[64];
    snprintf(key, sizeof(key), "pool:lock:%d", w->id);
    snprintf(owner, sizeof(owner), "pool-test:%d", w->id);
    for (int i = 0; i < STRESS_OPS; i++) {
        int r = one_op(w->st->c, i % 4, key, owner);
        if (r != RLOCK_OK) {
            record_failure(w->st, "op", r);
        }
        atomic_fetch_add(&w->st->done, 1);
    }
    return NULL;
}

static void test_stress_with_kills(void **state)
{
    rh_server *s = *state;
    const char *hset[] = {"HSET", "pool:shared", "f", "1", NULL};
    assert_int_equal(rh_cmd_int(s, hset), 1);
    rlock_options o;
    cu_opts(&o, s);
    o.command_timeout_ms = 3000;
    stress st = {.first_error = ""};
    pthread_mutex_init(&st.mu, NULL);
    assert_int_equal(rlock_client_new(&o, &st.c), RLOCK_OK);

    pthread_t th[STRESS_THREADS];
    worker w[STRESS_THREADS];
    int64_t t0 = rh_now_ms();
    for (int i = 0; i < STRESS_THREADS; i++) {
        w[i] = (worker){&st, i};
        assert_int_equal(pthread_create(&th[i], NULL, stress_main, &w[i]), 0);
    }
    /* Kill at 10%, 28%, 46%, 64% and 82% of the run, so that every kill lands mid-run. */
    const long total = (long)STRESS_THREADS * STRESS_OPS;
    long killed_conns = 0;
    int effective_kills = 0;
    for (int k = 0; k < KILLS; k++) {
        long mark = total / 10 + (long)k * total * 18 / 100;
        while (atomic_load(&st.done) < mark) {
            rh_sleep_ms(1);
        }
        const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", NULL};
        long long n = rh_cmd_int(s, kill);
        assert_true(n >= 0);
        killed_conns += n;
        effective_kills += n > 0;
    }
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    int64_t dt = rh_now_ms() - t0;
    print_message("stress: %ld ops in %lld ms, %d kills closed %ld connections, %ld failures%s%s\n",
                  (long)atomic_load(&st.done), (long long)dt, effective_kills, killed_conns,
                  (long)atomic_load(&st.failures), st.first_error[0] ? ", first: " : "",
                  st.first_error);
    assert_int_equal(atomic_load(&st.done), total);
    assert_int_equal(atomic_load(&st.failures), 0);
    /* Each kill really hit the pool's connections (at least one borrowed or idle one). */
    assert_int_equal(effective_kills, KILLS);
    assert_true(killed_conns >= KILLS);

    /* Healed: later calls succeed, and the client has at most pool_size normal connections. */
    for (int i = 0; i < 200; i++) {
        assert_int_equal(one_op(st.c, i % 4, "pool:lock:x", "pool-test:x"), RLOCK_OK);
    }
    /* Holding all 4 proves the pool's count of open connections is not inflated by the kills;
     * the server then sees exactly 4 pool + 1 subscriber (not subscribed to anything yet, so of
     * type normal) + 1 admin connection: a leaked connection would show up as a seventh. */
    rlk_conn *held[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rlk_pool_borrow(st.c->pool, &held[i]), RLOCK_OK);
    }
    /* The last kill may also have closed the idle subscriber connection: let it redial. */
    int normal = cu_client_count(s, "normal");
    for (int64_t end = rh_now_ms() + 1000; normal < 6 && rh_now_ms() < end;) {
        rh_sleep_ms(10);
        normal = cu_client_count(s, "normal");
    }
    for (int i = 0; i < 4; i++) {
        rlk_pool_return(st.c->pool, held[i], 0);
    }
    print_message("after the kills: %d normal connections (pool 4 + subscriber 1 + admin 1)\n",
                  normal);
    assert_int_equal(normal, 4 + 1 + 1);
    rlock_client_free(st.c);
    pthread_mutex_destroy(&st.mu);
}

typedef struct borrower {
    rlock_client *c;
    int result;
    int64_t started, finished;
    rlk_conn *conn;
} borrower;

static void *borrow_main(void *arg)
{
    borrower *b = arg;
    b->started = rh_now_ms();
    b->result = rlk_pool_borrow(b->c->pool, &b->conn);
    b->finished = rh_now_ms();
    return NULL;
}

static int ping_conn(rlk_conn *conn)
{
    const char *argv[] = {"PING"};
    redisReply *r = NULL;
    int ok = rlk_conn_command(conn, 1, argv, NULL, &r) == RLOCK_OK &&
             r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

static void test_borrow_bound(void **state)
{
    rh_server *s = *state;
    rlock_options o;
    cu_opts(&o, s);
    o.pool_size = 4;
    o.command_timeout_ms = 200;
    rlock_client *c = tc_client(&o);
    rlk_conn *held[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rlk_pool_borrow(c->pool, &held[i]), RLOCK_OK);
        assert_true(ping_conn(held[i]));
        for (int j = 0; j < i; j++) {
            assert_ptr_not_equal(held[i], held[j]);
        }
    }
    /* Exhausted: a fifth borrow gives up after command_timeout_ms. */
    rlk_conn *extra = NULL;
    int64_t t0 = rh_now_ms();
    int r = rlk_pool_borrow(c->pool, &extra);
    int64_t dt_borrow = rh_now_ms() - t0;
    assert_int_equal(r, RLOCK_ECONN);
    assert_null(extra);
    assert_non_null(strstr(rlock_last_error(), "pool"));
    /* A command on the exhausted pool fails the same way. */
    rlk_args a;
    rlk_args_init(&a);
    rlk_args_adds(&a, "PING");
    redisReply *rep = NULL;
    t0 = rh_now_ms();
    r = rlk_cmd(c, RLK_IDEMPOTENT, &a, &rep);
    int64_t dt_cmd = rh_now_ms() - t0;
    assert_int_equal(r, RLOCK_ECONN);
    assert_null(rep);

    /* A waiting borrower gets a returned connection promptly, not at its deadline. */
    borrower b = {.c = c};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, borrow_main, &b), 0);
    rh_sleep_ms(60);
    int64_t returned_at = rh_now_ms();
    rlk_pool_return(c->pool, held[0], 0);
    pthread_join(th, NULL);
    int64_t handoff = b.finished - returned_at;
    print_message("5th borrow failed after %lld ms, rlk_cmd after %lld ms (timeout 200); "
                  "hand-off to a waiting borrower took %lld ms (it waited %lld ms)\n",
                  (long long)dt_borrow, (long long)dt_cmd, (long long)handoff,
                  (long long)(b.finished - b.started));
    assert_in_range(dt_borrow, 195, 400);
    assert_in_range(dt_cmd, 195, 400);
    assert_int_equal(b.result, RLOCK_OK);
    assert_ptr_equal(b.conn, held[0]);
    assert_in_range(handoff, 0, 50);
    assert_true(ping_conn(b.conn));
    held[0] = b.conn;
    /* A connection returned as broken frees its slot: the next borrow dials a new one. */
    rlk_pool_return(c->pool, held[1], 1);
    rlk_conn *fresh = NULL;
    t0 = rh_now_ms();
    assert_int_equal(rlk_pool_borrow(c->pool, &fresh), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 150);
    assert_true(ping_conn(fresh));
    held[1] = fresh;
    for (int i = 0; i < 4; i++) {
        rlk_pool_return(c->pool, held[i], 0);
    }
    rep = NULL;
    assert_int_equal(rlk_cmd(c, RLK_IDEMPOTENT, &a, &rep), RLOCK_OK);
    freeReplyObject(rep);
    rlock_client_free(c);
}

/* A client on s with the core tests' options. */
static rlock_client *pool_client(const rh_server *s)
{
    rlock_options o;
    cu_opts(&o, s);
    return tc_client(&o);
}

/* One INCR of key, sent as a command that must not be resent (flags 0): only a live connection
 * can carry it without an error. */
static int incr_once(rlock_client *c, const char *key)
{
    rlk_args a;
    rlk_args_init(&a);
    rlk_args_adds(&a, "INCR");
    rlk_args_adds(&a, key);
    redisReply *rep = NULL;
    int r = rlk_cmd(c, 0, &a, &rep);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = RLOCK_EPROTO;
    }
    freeReplyObject(rep);
    return r;
}

/* The server closes every pooled connection while it is idle; the next non-idempotent command,
 * sent after the pool's freshness window, runs once on a new connection instead of failing on a
 * dead one (without the borrow's check its read would see EOF, which a command that may not be
 * resent cannot survive). */
static void test_dead_idle_connection(void **state)
{
    rh_server *s = *state;
    rlock_client *c = pool_client(s);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(incr_once(c, "pool:dead"), RLOCK_OK);
        const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", NULL};
        assert_true(rh_cmd_int(s, kill) >= 1);
        rh_sleep_ms(20); /* longer than the 1 ms in which a returned connection is not checked */
        long checks = rlk_pool_checks(c->pool);
        assert_int_equal(incr_once(c, "pool:dead"), RLOCK_OK);
        assert_true(rlk_pool_checks(c->pool) > checks);
    }
    const char *get[] = {"GET", "pool:dead", NULL};
    assert_int_equal(rh_cmd_int(s, get), 6);
    rlock_client_free(c);
}

/* Back-to-back commands on one thread reuse the connection just returned, without the liveness
 * poll: at most a few of them (a thread descheduled for a millisecond between two commands on
 * this shared machine) may be checked. Every command is still checked before this change. */
static void test_fresh_connection_unchecked(void **state)
{
    rlock_client *c = pool_client(*state);
    assert_int_equal(incr_once(c, "pool:fresh"), RLOCK_OK);
    long checks = rlk_pool_checks(c->pool);
    const int n = 1000;
    for (int i = 0; i < n; i++) {
        assert_int_equal(incr_once(c, "pool:fresh"), RLOCK_OK);
    }
    long polled = rlk_pool_checks(c->pool) - checks;
    print_message("%d back-to-back commands: %ld liveness polls\n", n, polled);
    assert_true(polled < n / 2);
    rlock_client_free(c);
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_stress_with_kills),
        TC_SERVER_TEST(test_borrow_bound), TC_SERVER_TEST(test_dead_idle_connection),
        TC_SERVER_TEST(test_fresh_connection_unchecked))
