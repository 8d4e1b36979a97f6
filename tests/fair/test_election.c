/*
 * Leader election (issue 32 point 3) on a real redis-server: the API on one process (values shown
 * only while their leader holds, terms kept after a resignation, bad input), then 5 candidates in
 * separate processes whose leader is SIGKILLed, SIGSTOPped and asked to resign in turn. Every
 * leader's term is larger than the one before; a leader acts only after Redis confirmed its
 * term, inside the independent checker (tc_mx), which must never see two leaders at once; the
 * stopped leader learns its loss (on_lost) and does not act after it; an observer in the parent
 * is woken within 50 ms of each new leader's record (the server's clock against the wake).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_checker.h"
#include "tc_redis.h"

#define CANDIDATES  5
#define WATCHDOG_MS 900

static rh_server *g_srv;

/* What the candidates and the parent share (an anonymous shared mapping). */
typedef struct shared {
    atomic_int stop;
    atomic_int leader;       /* the candidate that leads now, -1 before the first */
    atomic_long leaderships; /* how many times a candidate became the leader */
    atomic_long last_term, bad_terms, bad_values, errors;
    atomic_int pause[CANDIDATES];  /* the parent asks a leader to stay out of its actions */
    atomic_int idle[CANDIDATES];   /* and it says it does */
    atomic_int resign[CANDIDATES]; /* the parent asks a leader to resign */
    atomic_int lost[CANDIDATES];   /* on_lost calls */
} shared;

static shared *g_sh;
static tc_mx *g_mx;

static void on_lost(const char *name, void *user_data)
{
    (void)name;
    atomic_fetch_add(&g_sh->lost[(intptr_t)user_data], 1);
}

static rlock_client *candidate_client(int i)
{
    rlock_options o;
    tc_options(&o, g_srv);
    o.watchdog_timeout_ms = WATCHDOG_MS;
    o.waiter_timeout_ms = 1500;
    o.on_lost = on_lost;
    o.user_data = (void *)(intptr_t)i;
    rlock_client *c = NULL;
    return rlock_client_new(&o, &c) == RLOCK_OK ? c : NULL;
}

/* 1 while Redis says that this candidate's term leads. */
static int still_leads(rlock_election *e, uint64_t term)
{
    char *v = NULL;
    uint64_t t = 0;
    int r = rlock_election_leader(e, &v, &t);
    free(v);
    return r == 1 && t == term;
}

/* Leading: acts (2 ms inside the checker) every 10 ms while Redis confirms the term, stays idle
 * while the parent asks, and resigns when asked or at the end. */
static void candidate_lead(rlock_election *e, int i, uint64_t term)
{
    int lost0 = atomic_load(&g_sh->lost[i]);
    while (!atomic_load(&g_sh->stop) && atomic_load(&g_sh->lost[i]) == lost0) {
        if (atomic_load(&g_sh->pause[i])) {
            atomic_store(&g_sh->idle[i], 1);
            rh_sleep_ms(5);
            continue;
        }
        atomic_store(&g_sh->idle[i], 0);
        if (!still_leads(e, term)) {
            /* Another leader took over (this process was stopped): the watchdog's next renewal
             * must report the loss. */
            for (int k = 0; k < 600 && atomic_load(&g_sh->lost[i]) == lost0; k++) {
                rh_sleep_ms(5);
            }
            return;
        }
        tc_mx_enter(g_mx, 0);
        rh_sleep_ms(2);
        tc_mx_leave(g_mx, 0);
        if (atomic_load(&g_sh->resign[i])) {
            atomic_store(&g_sh->resign[i], 0);
            break;
        }
        rh_sleep_ms(10);
    }
    (void)rlock_election_resign(e);
}

static void candidate(int i)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* Never outlives a test that failed. */
    rlock_client *c = candidate_client(i);
    rlock_election *e = c != NULL ? rlock_election_open(c, "elect:5") : NULL;
    char value[32];
    snprintf(value, sizeof(value), "cand-%d", i);
    while (e != NULL && !atomic_load(&g_sh->stop)) {
        int r = rlock_election_campaign(e, value, 200);
        if (r != RLOCK_OK) {
            atomic_fetch_add(&g_sh->errors, r != RLOCK_ETIMEDOUT);
            rh_sleep_ms(r != RLOCK_ETIMEDOUT ? 50 : 0);
            continue;
        }
        char *v = NULL;
        uint64_t term = 0;
        if (rlock_election_leader(e, &v, &term) != 1 || v == NULL || strcmp(v, value) != 0) {
            atomic_fetch_add(&g_sh->bad_values, 1);
        }
        free(v);
        long prev = atomic_exchange(&g_sh->last_term, (long)term);
        atomic_fetch_add(&g_sh->bad_terms, (long)term <= prev);
        atomic_store(&g_sh->leader, i);
        atomic_fetch_add(&g_sh->leaderships, 1);
        candidate_lead(e, i, term);
    }
    rlock_election_free(e);
    rlock_client_free(c);
    _exit(e != NULL ? 0 : 1);
}

/* Waits up to ms for the number of leaderships to pass n; the new leader, or -1. */
static int await_leader_after(long n, int64_t ms)
{
    int64_t end = rh_now_ms() + ms;
    while (atomic_load(&g_sh->leaderships) <= n && rh_now_ms() < end) {
        rh_sleep_ms(5);
    }
    return atomic_load(&g_sh->leaderships) > n ? atomic_load(&g_sh->leader) : -1;
}

/* Asks leader i to stay idle and waits until it is. */
static void park(int i)
{
    atomic_store(&g_sh->pause[i], 1);
    for (int k = 0; k < 400 && !atomic_load(&g_sh->idle[i]); k++) {
        rh_sleep_ms(5);
    }
    assert_true(atomic_load(&g_sh->idle[i]));
}

/* The observer: the parent's thread that waits for each next term and measures how late it was
 * woken against the record's start on the server's clock (the same host's clock). */
typedef struct observer {
    rlock_election *e;
    atomic_int stop;
    int wakes;
    int64_t worst_ms;
    pthread_t thread;
} observer;

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void *observe_run(void *arg)
{
    observer *ob = arg;
    redisContext *raw = rh_connect(g_srv);
    while (raw != NULL && !atomic_load(&ob->stop)) {
        char *v = NULL;
        uint64_t term = 0;
        (void)rlock_election_leader(ob->e, &v, &term);
        free(v);
        if (rlock_election_observe(ob->e, term, 500) != RLOCK_OK) {
            continue;
        }
        int64_t woken = wall_ms();
        redisReply *r = redisCommand(raw, "HGET {elect:5}:rlock_election since");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            int64_t late = woken - strtoll(r->str, NULL, 10);
            ob->worst_ms = late > ob->worst_ms ? late : ob->worst_ms;
            ob->wakes++;
        }
        freeReplyObject(r);
    }
    if (raw != NULL) {
        redisFree(raw);
    }
    return NULL;
}

/* The three ways a leadership ends, one after the other; the observer runs meanwhile. */
static void rounds(pid_t *pid)
{
    int l = await_leader_after(0, 10000);
    assert_true(l >= 0);
    rh_sleep_ms(200);
    long n = atomic_load(&g_sh->leaderships);
    park(l);
    kill(pid[l], SIGKILL);
    assert_int_equal(rh_wait_child(pid[l], 5000), 128 + SIGKILL);
    pid[l] = 0;
    int l2 = await_leader_after(n, 10000);
    print_message("SIGKILL: candidate %d -> %d\n", l, l2);
    assert_true(l2 >= 0 && l2 != l);
    rh_sleep_ms(200);
    n = atomic_load(&g_sh->leaderships);
    park(l2);
    int lost0 = atomic_load(&g_sh->lost[l2]);
    kill(pid[l2], SIGSTOP);
    int l3 = await_leader_after(n, 10000);
    kill(pid[l2], SIGCONT);
    atomic_store(&g_sh->pause[l2], 0);
    print_message("SIGSTOP: candidate %d -> %d\n", l2, l3);
    assert_true(l3 >= 0 && l3 != l2);
    for (int k = 0; k < 600 && atomic_load(&g_sh->lost[l2]) == lost0; k++) {
        rh_sleep_ms(5);
    }
    assert_true(atomic_load(&g_sh->lost[l2]) > lost0); /* on_lost after it woke up */
    rh_sleep_ms(200);
    n = atomic_load(&g_sh->leaderships);
    atomic_store(&g_sh->resign[l3], 1);
    int l4 = await_leader_after(n, 5000);
    print_message("resign: candidate %d -> %d\n", l3, l4);
    assert_true(l4 >= 0 && l4 != l3);
    rh_sleep_ms(200);
}

static void test_five_candidates(void **state)
{
    (void)state;
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(g_sh != MAP_FAILED);
    memset(g_sh, 0, sizeof(*g_sh));
    atomic_store(&g_sh->leader, -1);
    g_mx = tc_mx_new();
    assert_non_null(g_mx);
    pid_t pid[CANDIDATES];
    for (int i = 0; i < CANDIDATES; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            candidate(i);
        }
        assert_true(pid[i] > 0);
    }
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c = tc_client(&o);
    observer ob = {.e = rlock_election_open(c, "elect:5")};
    assert_non_null(ob.e);
    pthread_create(&ob.thread, NULL, observe_run, &ob);
    rounds(pid);
    atomic_store(&g_sh->stop, 1);
    for (int i = 0; i < CANDIDATES; i++) {
        if (pid[i] > 0) {
            assert_int_equal(rh_wait_child(pid[i], 10000), 0);
        }
    }
    atomic_store(&ob.stop, 1);
    pthread_join(ob.thread, NULL);
    print_message("%ld leaderships, last term %ld, %ld checked actions; observer woken %d times, "
                  "at worst %lld ms after the record\n",
                  atomic_load(&g_sh->leaderships), atomic_load(&g_sh->last_term),
                  tc_mx_entries(g_mx, 0), ob.wakes, (long long)ob.worst_ms);
    assert_int_equal(tc_mx_violations(g_mx), 0);
    assert_int_equal(tc_mx_counter(g_mx, 0), tc_mx_entries(g_mx, 0));
    assert_true(tc_mx_entries(g_mx, 0) > 20);
    assert_int_equal(atomic_load(&g_sh->bad_terms), 0);
    assert_int_equal(atomic_load(&g_sh->bad_values), 0);
    assert_int_equal(atomic_load(&g_sh->errors), 0);
    assert_true(atomic_load(&g_sh->leaderships) >= 4);
    assert_true(ob.wakes >= 3);
    assert_true(ob.worst_ms <= 50);
    rlock_election_free(ob.e);
    rlock_client_free(c);
    tc_mx_free(g_mx);
    munmap(g_sh, sizeof(*g_sh));
}

/* One process: the value shows while its leader holds, the term outlives it, waits time out. */
static void test_api(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c = tc_client(&o);
    rlock_election *a = rlock_election_open(c, "elect:api");
    rlock_election *b = rlock_election_open(c, "elect:api");
    char *v = (char *)"x";
    uint64_t term = 99;
    assert_int_equal(rlock_election_leader(a, &v, &term), 0);
    assert_null(v);
    assert_int_equal(term, 0);
    int64_t since = -1;
    assert_int_equal(rlock_election_leader_since(a, &v, &term, &since), 0);
    assert_int_equal(since, 0);
    assert_int_equal(rlock_election_observe(a, 0, 0), RLOCK_ETIMEDOUT);
    struct timeval before, after;
    gettimeofday(&before, NULL);
    assert_int_equal(rlock_election_campaign(a, "host-a:80", 0), RLOCK_OK);
    gettimeofday(&after, NULL);
    assert_int_equal(rlock_election_leader(b, &v, &term), 1);
    assert_string_equal(v, "host-a:80");
    free(v);
    /* The term began while the campaign ran (the server's clock is this machine's). */
    assert_int_equal(rlock_election_leader_since(b, &v, NULL, &since), 1);
    free(v);
    int64_t lo = (int64_t)before.tv_sec * 1000 + before.tv_usec / 1000;
    int64_t hi = (int64_t)after.tv_sec * 1000 + after.tv_usec / 1000;
    assert_true(since >= lo - 5 && since <= hi + 5);
    assert_true(term > 0);
    assert_int_equal(rlock_election_observe(b, term - 1, 0), RLOCK_OK);
    assert_int_equal(rlock_election_observe(b, term, 100), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_election_resign(a), RLOCK_OK);
    uint64_t t2 = 0;
    assert_int_equal(rlock_election_leader(b, &v, &t2), 0);
    assert_null(v);
    assert_int_equal(t2, term);
    assert_int_equal(rlock_election_resign(a), RLOCK_ENOTOWNER);
    /* A leader whose hold is gone is no longer shown. */
    assert_int_equal(rlock_election_campaign(a, "host-a:81", 0), RLOCK_OK);
    const char *del[] = {"DEL", "elect:api", NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    assert_int_equal(rlock_election_leader(b, &v, &t2), 0);
    assert_true(t2 > term);
    /* Bad input. */
    assert_int_equal(rlock_election_campaign(NULL, "v", 0), RLOCK_EINVAL);
    assert_int_equal(rlock_election_campaign(b, NULL, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_election_leader(b, NULL, &t2), RLOCK_EINVAL);
    assert_int_equal(rlock_election_leader_since(b, NULL, &t2, &since), RLOCK_EINVAL);
    assert_int_equal(rlock_election_leader_since(NULL, &v, &t2, &since), RLOCK_EINVAL);
    assert_int_equal(rlock_election_observe(b, 0, -1), RLOCK_EINVAL);
    assert_null(rlock_election_open(c, ""));
    assert_null(rlock_election_open(NULL, "x"));
    rlock_election_free(NULL);
    rlock_election_free(b);
    rlock_election_free(a);
    rlock_client_free(c);
}

static int setup(void **state)
{
    (void)state;
    return tc_fixture_open(&g_srv, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return tc_fixture_close(&g_srv, NULL);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_api), cmocka_unit_test(test_five_candidates))
