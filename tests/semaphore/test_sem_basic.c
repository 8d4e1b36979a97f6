/*
 * Semaphore and latch basics on a real redis-server: bad input, a never-set semaphore, plain and
 * leased permits, the data written (Redisson's layout), a release of k permits waking at most k
 * waiters, no lost wake-up for waiters between their attempt and their sleep, the number of
 * commands a blocked waiter sends, and the latch's calls.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "pubsub.h"
#include "sem_common.h"
#include "tc_thread.h"
#include "notified_wait.h"

static rh_server *g_srv;
static rlock_client *g_c;

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_srv = rh_start(NULL);
    g_c = g_srv ? sc_client(g_srv) : NULL;
    return g_c == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    rlock_client_free(g_c);
    rh_free(g_srv);
    return 0;
}

static void test_bad_input(void **state)
{
    (void)state;
    assert_null(rlock_semaphore_open(NULL, "s"));
    assert_null(rlock_semaphore_open(g_c, NULL));
    assert_null(rlock_semaphore_open(g_c, ""));
    assert_null(rlock_latch_open(g_c, NULL));
    assert_null(rlock_latch_open(NULL, "l"));
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire(NULL, 1, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_available(NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_await(NULL, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_count(NULL), RLOCK_EINVAL);
    rlock_semaphore *s = rlock_semaphore_open(g_c, "bad:sem");
    rlock_latch *l = rlock_latch_open(g_c, "bad:latch");
    assert_non_null(s);
    assert_non_null(l);
    assert_int_equal(rlock_semaphore_try_set_permits(s, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_try_set_permits(s, INT64_C(1) << 40), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_add_permits(s, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_add_permits(s, INT64_MIN), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire(s, 0, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire(s, -1, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire(s, INT64_MAX, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire(s, 1, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release(s, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release(s, INT64_C(1) << 31), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 0, id), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased(s, -1, 100, id), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 100, NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased(s, NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased(s, "1234"), RLOCK_EINVAL);
    assert_int_equal(rlock_semaphore_release_leased(s, "zz345678901234567890123456789012"),
                     RLOCK_EINVAL);
    assert_true(strlen(rlock_last_error()) > 0);
    assert_int_equal(rlock_latch_try_set_count(l, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_latch_await(l, -5), RLOCK_EINVAL);
    /* Nothing was written by the rejected calls. */
    const char *exists[] = {"EXISTS", "bad:sem", "bad:latch", "{bad:sem}:timeout", NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    rlock_semaphore_free(s);
    rlock_latch_free(l);
}

static void test_plain_permits(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "plain");
    /* Never set: 0 available, as Redisson. */
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 3), 1);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 5), 0);
    const char *get[] = {"GET", "plain", NULL};
    assert_int_equal(rh_cmd_int(g_srv, get), 3);
    assert_int_equal(rlock_semaphore_acquire(s, 2, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 1);
    assert_int_equal(rlock_semaphore_acquire(s, 2, 50), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_semaphore_release(s, 2), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 3);
    assert_int_equal(rlock_semaphore_add_permits(s, -4), RLOCK_OK);
    assert_int_equal(rh_cmd_int(g_srv, get), -1); /* Redisson lets the count go below 0 */
    assert_int_equal(rlock_semaphore_available(s), 0);
    assert_int_equal(rlock_semaphore_add_permits(s, 2), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 1);
    const char *type[] = {"TYPE", "plain", NULL};
    char *t = rh_cmd_str(g_srv, type);
    assert_string_equal(t, "string");
    free(t);
    rlock_semaphore_free(s);
}

typedef struct waiter {
    rlock_semaphore *s;
    int64_t permits;
    int64_t wait_ms;
    int64_t lease_ms; /* 0: plain */
    int result;
    int64_t done_at;
    char id[RLOCK_PERMIT_ID_LEN + 1];
    pthread_t t;
} waiter;

static atomic_int g_done;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->result = w->lease_ms == 0
                    ? rlock_semaphore_acquire(w->s, w->permits, w->wait_ms)
                    : rlock_semaphore_acquire_leased(w->s, w->wait_ms, w->lease_ms, w->id);
    w->done_at = rh_now_ms();
    atomic_fetch_add(&g_done, 1);
    return NULL;
}

static void start_waiter(waiter *w, rlock_semaphore *s, int64_t n, int64_t wait_ms, int64_t lease)
{
    memset(w, 0, sizeof(*w));
    w->s = s;
    w->permits = n;
    w->wait_ms = wait_ms;
    w->lease_ms = lease;
    w->result = 99;
    assert_int_equal(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

/* Opens name on c with no permits and starts w waiting there for n permits (for up to wait_ms);
 * returns the semaphore once w has waited 200 ms without getting them. */
static rlock_semaphore *open_blocked(rlock_client *c, const char *name, waiter *w, int64_t n,
                                     int64_t wait_ms)
{
    rlock_semaphore *s = rlock_semaphore_open(c, name);
    assert_int_equal(rlock_semaphore_try_set_permits(s, 0), 1);
    start_waiter(w, s, n, wait_ms, 0);
    rh_sleep_ms(200);
    assert_int_equal(w->result, 99);
    return s;
}

static void test_release_wakes_waiter(void **state)
{
    (void)state;
    waiter w;
    rlock_semaphore *s = open_blocked(g_c, "wake", &w, 2, 10000);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    rh_sleep_ms(100);
    assert_int_equal(w.result, 99); /* one permit is not enough for two */
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    pthread_join(w.t, NULL);
    assert_int_equal(w.result, RLOCK_OK);
    assert_true(w.done_at - t0 < 5000); /* woken by the message, not by the 10 s wait */
    assert_int_equal(rlock_semaphore_available(s), 0);
    rlock_semaphore_free(s);
}

static void test_leased_permits(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "leased");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 1), 1);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, 400, id), RLOCK_OK);
    assert_int_equal(strlen(id), RLOCK_PERMIT_ID_LEN);
    assert_int_equal(strspn(id, "0123456789abcdef"), RLOCK_PERMIT_ID_LEN);
    /* Redisson's layout: the id's 16 raw bytes in {name}:timeout, scored with the expiry. */
    redisContext *raw = rh_connect(g_srv);
    unsigned char bin[16];
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(id + 2 * i, "%2x", &v);
        bin[i] = (unsigned char)v;
    }
    redisReply *r = redisCommand(raw, "ZSCORE {leased}:timeout %b", bin, (size_t)16);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    assert_int_equal(rlock_semaphore_available(s), 0);
    /* Nobody releases: the waiter wakes when the lease runs out (the attempt's hint). */
    waiter w;
    int64_t t0 = rh_now_ms();
    start_waiter(&w, s, 1, 10000, 60000);
    pthread_join(w.t, NULL);
    assert_int_equal(w.result, RLOCK_OK);
    assert_true(w.done_at - t0 >= 300);
    assert_true(w.done_at - t0 < 5000);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ENOTOWNER); /* expired */
    assert_int_equal(rlock_semaphore_release_leased(s, w.id), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release_leased(s, w.id), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_semaphore_available(s), 1);
    /* Upper-case hex names the same permit. */
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, id), RLOCK_OK);
    for (char *p = id; *p; p++) {
        *p = (char)(*p >= 'a' && *p <= 'f' ? *p - 32 : *p);
    }
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_OK);
    redisFree(raw);
    rlock_semaphore_free(s);
}

/* Waits until the server's EVALSHA count has been stable for 300 ms. */
static long long quiet_evalsha(void)
{
    long long last = -1;
    int stable = 0;
    while (stable < 6) {
        rh_sleep_ms(50);
        long long now = rh_cmdstat_calls(g_srv, "evalsha");
        stable = now == last ? stable + 1 : 0;
        last = now;
    }
    return last;
}

/* A semaphore with no permits seen from two clients: s on the group's, s2 on a second one. */
typedef struct two_sides {
    rlock_client *c2;
    rlock_semaphore *s, *s2;
} two_sides;

static void two_sides_open(two_sides *t, const char *name)
{
    t->s = rlock_semaphore_open(g_c, name);
    t->c2 = sc_client(g_srv);
    t->s2 = rlock_semaphore_open(t->c2, name);
    assert_int_equal(rlock_semaphore_try_set_permits(t->s, 0), 1);
}

/* two_sides_open(), then n waiters w on t->s, each for one permit (for up to wait_ms). */
static void two_sides_waiters(two_sides *t, const char *name, waiter *w, int n, int64_t wait_ms)
{
    two_sides_open(t, name);
    for (int i = 0; i < n; i++) {
        start_waiter(&w[i], t->s, 1, wait_ms, 0);
    }
}

static void two_sides_close(two_sides *t)
{
    sc_close(t->s2, t->c2);
    rlock_semaphore_free(t->s);
}

static void test_release_wakes_at_most_k(void **state)
{
    (void)state;
    enum { N = 10 };
    two_sides t;
    waiter w[N];
    atomic_store(&g_done, 0);
    two_sides_waiters(&t, "herd", w, N, 20000);
    rlock_semaphore *s2 = t.s2;
    assert_int_equal(rlock_semaphore_available(s2), 0); /* loads the scripts on c2's side */
    quiet_evalsha();
    assert_int_equal(atomic_load(&g_done), 0);
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_semaphore_release(s2, 1), RLOCK_OK);
    long long calls = quiet_evalsha();
    print_message("release(1) with %d waiters: %lld EVALSHA (the release + attempts)\n", N, calls);
    assert_int_equal(atomic_load(&g_done), 1);
    assert_int_equal(calls, 2); /* the release and exactly one woken attempt */
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_semaphore_release(s2, 3), RLOCK_OK);
    calls = quiet_evalsha();
    print_message("release(3) with %d waiters: %lld EVALSHA\n", N - 1, calls);
    assert_int_equal(atomic_load(&g_done), 4);
    assert_int_equal(calls, 4);
    assert_int_equal(rlock_semaphore_release(s2, N - 4), RLOCK_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        assert_int_equal(w[i].result, RLOCK_OK);
    }
    two_sides_close(&t);
}

/* The hook holds every waiter between its failed attempt and its sleep until released. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_arrived, g_go;

static void hold_between(void *arg, int round)
{
    (void)arg;
    if (round != 1) {
        return;
    }
    pthread_mutex_lock(&g_mu);
    g_arrived++;
    pthread_cond_broadcast(&g_cv);
    while (!g_go) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
}

static void test_no_lost_wakeup_between_attempt_and_wait(void **state)
{
    (void)state;
    enum { N = 4 };
    g_arrived = g_go = 0;
    rlk_wait_set_test_hook(hold_between, NULL);
    two_sides t;
    waiter w[N];
    two_sides_waiters(&t, "between", w, N, 30000);
    pthread_mutex_lock(&g_mu);
    while (g_arrived < N) {
        pthread_cond_wait(&g_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    /* Every waiter failed its attempt and is not asleep: release now, and let the subscriber
     * read the message before any of them sleeps. */
    uint64_t before = rlk_pubsub_messages(g_c->pubsub);
    assert_int_equal(rlock_semaphore_release(t.s2, N), RLOCK_OK);
    int64_t t0 = rh_now_ms();
    while (rlk_pubsub_messages(g_c->pubsub) == before && rh_now_ms() - t0 < 5000) {
        rh_sleep_ms(1);
    }
    assert_true(rlk_pubsub_messages(g_c->pubsub) > before);
    pthread_mutex_lock(&g_mu);
    g_go = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    int64_t go_at = rh_now_ms();
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        assert_int_equal(w[i].result, RLOCK_OK);
        /* Nothing else is published: a waiter that slept past the permits would only return
         * at its 30 s deadline. 10 s is far from both on a loaded machine. */
        assert_true(w[i].done_at - go_at < 10000);
    }
    rlk_wait_set_test_hook(NULL, NULL);
    two_sides_close(&t);
}

/* Commands a client can send itself (INFO commandstats also counts the commands run inside
 * scripts, which are not round trips). */
static long long client_calls(int with_get)
{
    static const char *const names[] = {"evalsha",   "eval",        "script|load",
                                        "subscribe", "unsubscribe", "ping"};
    long long n = with_get ? rh_cmdstat_calls(g_srv, "get") : 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        n += rh_cmdstat_calls(g_srv, names[i]);
    }
    return n;
}

static void test_blocked_waiter_sends_few_commands(void **state)
{
    (void)state;
    rlock_semaphore *s = rlock_semaphore_open(g_c, "quiet:sem");
    rlock_latch *l = rlock_latch_open(g_c, "quiet:latch");
    assert_int_equal(rlock_semaphore_try_set_permits(s, 0), 1);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_ETIMEDOUT); /* scripts loaded */
    assert_int_equal(rlock_latch_try_set_count(l, 1), 1);
    rh_sleep_ms(300); /* lingering subscriptions of earlier tests are gone */
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 3000), RLOCK_ETIMEDOUT);
    rh_sleep_ms(300);                      /* the linger ends: UNSUBSCRIBE is counted too */
    long long sem_calls = client_calls(0); /* GET runs inside its script */
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_latch_await(l, 3000), RLOCK_ETIMEDOUT);
    rh_sleep_ms(300);
    long long latch_calls = client_calls(1);
    print_message("blocked 3 s: semaphore acquire sent %lld commands, latch await %lld\n",
                  sem_calls, latch_calls);
    /* attempt, SUBSCRIBE, attempt on the confirmation, the attempt at the deadline,
     * UNSUBSCRIBE: 5 (the latch's attempt is a GET, the semaphore's an EVALSHA, whose inner
     * GET is not counted: it is no command sent). Polling would send hundreds. */
    assert_true(sem_calls >= 4 && sem_calls <= 6);
    assert_true(latch_calls >= 4 && latch_calls <= 6);
    rlock_latch_free(l);
    rlock_semaphore_free(s);
}

static int await_latch(void *latch)
{
    return rlock_latch_await(latch, 20000);
}

static void test_latch_basics(void **state)
{
    (void)state;
    rlock_latch *l = rlock_latch_open(g_c, "latch:basic");
    assert_non_null(l);
    assert_int_equal(rlock_latch_count(l), 0);
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_latch_await(l, RLOCK_WAIT_FOREVER), RLOCK_OK); /* never set */
    assert_int_equal(rh_cmdstat_calls(g_srv, "subscribe"), 0);
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK); /* not counting: stays absent */
    const char *exists[] = {"EXISTS", "latch:basic", NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    assert_int_equal(rlock_latch_try_set_count(l, 2), 1);
    assert_int_equal(rlock_latch_try_set_count(l, 3), 0);
    assert_int_equal(rlock_latch_count(l), 2);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_latch_await(l, 100), RLOCK_ETIMEDOUT);
    tc_bg a;
    tc_bg_start(&a, await_latch, l);
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    rh_sleep_ms(200);
    assert_int_equal(a.result, TC_BG_RUNNING);
    assert_int_equal(rlock_latch_count(l), 1);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_latch_count_down(l), RLOCK_OK);
    assert_int_equal(tc_bg_join(&a), RLOCK_OK);
    assert_true(rh_now_ms() - t0 < 10000);
    assert_int_equal(rlock_latch_count(l), 0);
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    rlock_latch_free(l);
}

/* rlock_client_interrupt() ends a semaphore wait as it ends a lock wait: the waiter gives up
 * with RLOCK_ETIMEDOUT long before its own wait_ms, and takes no permit. */
static void test_interrupted_wait(void **state)
{
    (void)state;
    rlock_client *c = sc_client(g_srv);
    waiter w;
    rlock_semaphore *s = open_blocked(c, "interrupted", &w, 1, 20000);
    int64_t t0 = rh_now_ms();
    rlock_client_interrupt(c);
    pthread_join(w.t, NULL);
    assert_int_equal(w.result, RLOCK_ETIMEDOUT);
    assert_true(w.done_at - t0 < 10000); /* ended by the interrupt, not by the 20 s wait */
    assert_int_equal(rlock_semaphore_release(s, 1), RLOCK_OK);
    assert_int_equal(rlock_semaphore_available(s), 1);
    sc_close(s, c);
}

static void test_closed_client(void **state)
{
    (void)state;
    rlock_client *c = sc_client(g_srv);
    rlock_semaphore *s = rlock_semaphore_open(c, "closed");
    rlock_latch *l = rlock_latch_open(c, "closed:latch");
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_try_set_permits(s, 2), 1);
    assert_int_equal(rlock_semaphore_acquire_leased(s, 0, -1, id), RLOCK_OK);
    rlock_client_free(c);
    assert_int_equal(rlock_semaphore_acquire(s, 1, 0), RLOCK_ECLOSED);
    assert_int_equal(rlock_semaphore_release_leased(s, id), RLOCK_ECLOSED);
    assert_int_equal(rlock_latch_await(l, 0), RLOCK_ECLOSED);
    assert_null(rlock_semaphore_open(c, "x"));
    rlock_semaphore_free(s);
    rlock_latch_free(l);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_bad_input), cmocka_unit_test(test_plain_permits),
        cmocka_unit_test(test_release_wakes_waiter), cmocka_unit_test(test_leased_permits),
        cmocka_unit_test(test_release_wakes_at_most_k),
        cmocka_unit_test(test_no_lost_wakeup_between_attempt_and_wait),
        cmocka_unit_test(test_blocked_waiter_sends_few_commands),
        cmocka_unit_test(test_latch_basics), cmocka_unit_test(test_interrupted_wait),
        cmocka_unit_test(test_closed_client))
