/*
 * rlock against the released Redisson (the Java peer of redisson_java.h) on one redis-server:
 * RLock and rlock's reentrant lock (mixed stress, wake-ups both ways, force unlock, watchdogs,
 * inspect), RFencedLock tokens, RFairLock's mixed queue, RReadWriteLock and RedissonMultiLock, and
 * rlock owners' holds, which Redisson sees as ordinary holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "redisson_java.h"
#include "redisson_java_cases.h"
#include "rlock.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* The Java side's lockWatchdogTimeout: short, so that 3 of its periods fit in a test. */
#define JAVA_WATCHDOG_MS 1500
/* The wake-up bound across sides, from the release call to the other side's grant. */
#define WAKE_MS 50.0
/* A bound on every single wake-up: far below the 60 s leases, so a wake-up within it came from
 * the release's message; the median of the rounds is held to WAKE_MS (a loaded machine may
 * delay one round by a scheduling slice). */
#define MESSAGE_MS 1000.0

static rh_server *g_srv;
static rj_peer *g_peer;

static int group_setup(void **state)
{
    rj_require(state);
    g_srv = tc_start();
    g_peer = rj_start(g_srv, JAVA_WATCHDOG_MS);
    print_message("Redisson %s, client id %s\n", rj_version(g_peer), rj_id(g_peer));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rj_stop(g_peer);
    rh_free(g_srv);
    return 0;
}

/* ---- mixed stress under the independent checker ------------------------------------------- */

typedef struct c_side {
    rlock_kind kind;
    const char *name;
    rj_checker *ck;
    int slot, threads, iters;
} c_side;

typedef struct c_thread {
    const c_side *side;
    rlock *l;
    int failures;
} c_thread;

static void *c_thread_run(void *arg)
{
    c_thread *t = arg;
    const c_side *s = t->side;
    for (int i = 0; i < s->iters; i++) {
        if (rlock_lock(t->l, 30000) != RLOCK_OK) {
            t->failures++;
            continue;
        }
        if (s->kind == RLOCK_READ) {
            rj_ck_read_enter(s->ck, s->slot);
            usleep(200);
            rj_ck_read_leave(s->ck, s->slot);
        } else {
            rj_ck_enter(s->ck, s->slot);
            usleep(200);
            rj_ck_leave(s->ck, s->slot);
        }
        t->failures += rlock_unlock(t->l) != RLOCK_OK;
    }
    return NULL;
}

/* A C process of the stress: its own client, s->threads threads on their own handles. Exits 0
 * when every lock and unlock succeeded. */
static int c_proc(void *arg)
{
    const c_side *s = arg;
    rlock_options o;
    tc_options(&o, g_srv);
    rlock_client *c = tc_client_try(&o);
    if (c == NULL) {
        return 1;
    }
    c_thread t[8];
    pthread_t th[8];
    for (int i = 0; i < s->threads; i++) {
        t[i] = (c_thread){.side = s, .l = rlock_open(c, s->kind, s->name)};
        pthread_create(&th[i], NULL, c_thread_run, &t[i]);
    }
    int failures = 0;
    for (int i = 0; i < s->threads; i++) {
        pthread_join(th[i], NULL);
        failures += t[i].failures;
        rlock_free(t[i].l);
    }
    rlock_client_free(c);
    return failures == 0 ? 0 : 1;
}

/* 2 C processes x 2 threads of kind c and 3 Java threads of Redisson's java_kind, 100 sections
 * each, on one name: the checker sees no violation and every section. */
static void mixed_stress(rlock_kind c_kind, const char *java_kind, const char *name)
{
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    c_side side = {.kind = c_kind, .name = name, .ck = ck, .threads = 2, .iters = 100};
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = rh_fork_child(c_proc, &side);
        assert_true(kids[i] > 0);
    }
    int ids[3];
    for (int i = 0; i < 3; i++) {
        char worker[16];
        snprintf(worker, sizeof(worker), "s%d", i);
        ids[i] = rj_send(g_peer, worker, "stress %s %s 100 200 %s 0", java_kind, name, path);
    }
    for (int i = 0; i < 3; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        assert_string_equal(r, "ok 100");
        free(r);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rh_wait_child(kids[i], 120000), 0);
    }
    rj_ck_slot *s = &ck->slot[0];
    long long sections = atomic_load(&s->entries) + atomic_load(&s->reads);
    print_message("%s: C %s x4 threads, Redisson %s x3 threads: %lld sections, %lld violations\n",
                  name, c_kind == RLOCK_READ ? "read" : (c_kind == RLOCK_WRITE ? "write" : "lock"),
                  java_kind, sections, (long long)atomic_load(&s->violations));
    assert_int_equal(atomic_load(&s->violations), 0);
    assert_int_equal(sections, 700);
    rj_checker_free(ck, path);
}

static void test_lock_mixed_stress(void **state)
{
    (void)state;
    mixed_stress(RLOCK_REENTRANT, "lock", "rj:stress");
}

static void test_rw_java_readers_c_writers(void **state)
{
    (void)state;
    mixed_stress(RLOCK_WRITE, "read", "rj:rw1");
}

static void test_rw_java_writers_c_readers(void **state)
{
    (void)state;
    mixed_stress(RLOCK_READ, "write", "rj:rw2");
}

/* ---- wake-ups across sides ---------------------------------------------------------------- */

/* Redisson holds name; an rlock waiter gets it after Redisson's unlock: the ms in between. */
static double java_release_wakes_c(const char *name)
{
    rj_expect(g_peer, "w1", "ok", "lock lock %s 60000", name);
    rlock_client *c;
    rlock *l = rj_open_own(g_srv, RLOCK_REENTRANT, name, &c);
    tc_holder h;
    tc_holder_start(&h, l, 10000, -1, 0);
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    assert_true(tc_wait_listeners(g_srv, channel, 1, 5000));
    rh_sleep_ms(100); /* its attempt after the subscription is over: it sleeps */
    char *r = rj_call(g_peer, "w1", "unlock lock %s", name);
    double released = rj_reply_ms(r);
    free(r);
    assert_int_equal(tc_holder_join(&h), RLOCK_OK);
    tc_close_own(l, c);
    return (double)h.got_at - released;
}

/* rlock holds name; a Redisson waiter gets it after rlock's unlock: the ms in between. */
static double c_release_wakes_java(const char *name)
{
    rlock_client *c;
    rlock *l = rj_open_own(g_srv, RLOCK_REENTRANT, name, &c);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    int id = rj_send(g_peer, "w2", "try lock %s 10000 -1", name);
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    assert_true(tc_wait_numsub(g_srv, channel, 1, 5000));
    rh_sleep_ms(100);
    double released = rj_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    char *r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double got = rj_reply_ms(r);
    free(r);
    rj_expect(g_peer, "w2", "ok", "unlock lock %s", name);
    tc_close_own(l, c);
    return got - released;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double v[5])
{
    qsort(v, 5, sizeof(v[0]), cmp_double);
    return v[2];
}

/* Each way, one warm-up round (class loading and the JIT on the Java side) and 5 measured
 * rounds: every wake-up comes within MESSAGE_MS of the release, far below the 60 s leases, so
 * it came from the release's message, and the median of each way within WAKE_MS. */
static void test_wakeups_both_ways(void **state)
{
    (void)state;
    double to_c[5], to_java[5];
    java_release_wakes_c("rj:wake:warm");
    c_release_wakes_java("rj:wake:warm");
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof(name), "rj:wake:%d", i);
        to_c[i] = java_release_wakes_c(name);
        to_java[i] = c_release_wakes_java(name);
        print_message("round %d: Redisson unlock -> rlock grant %.1f ms, rlock unlock -> "
                      "Redisson grant %.1f ms\n",
                      i, to_c[i], to_java[i]);
        assert_true(to_c[i] >= 0 && to_c[i] < MESSAGE_MS);
        assert_true(to_java[i] >= 0 && to_java[i] < MESSAGE_MS);
    }
    double mc = median5(to_c), mj = median5(to_java);
    print_message("medians: to rlock %.1f ms, to Redisson %.1f ms\n", mc, mj);
    assert_true(mc < WAKE_MS && mj < WAKE_MS);
}

/* rlock_force_unlock() of a lock rlock holds wakes a waiting Redisson thread, and Redisson's
 * forceUnlock() of a lock it holds wakes a waiting rlock thread (60 s leases both). */
static void test_force_unlock_wakes_other_side(void **state)
{
    (void)state;
    const char *name = "rj:force";
    rlock_client *c;
    rlock *l = rj_open_own(g_srv, RLOCK_REENTRANT, name, &c);
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    int id = rj_send(g_peer, "f1", "try lock %s 10000 -1", name);
    assert_true(tc_wait_numsub(g_srv, "redisson_lock__channel:{rj:force}", 1, 5000));
    rh_sleep_ms(100);
    double forced = rj_now_ms();
    assert_int_equal(rlock_force_unlock(l), 1);
    char *r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '1');
    double to_java = rj_reply_ms(r) - forced;
    free(r);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST); /* its hold was forced away */
    /* Now Redisson holds it (its thread f1); an rlock thread waits; Redisson forces it open. */
    tc_holder h;
    tc_holder_start(&h, l, 10000, -1, 0);
    assert_true(tc_wait_listeners(g_srv, "redisson_lock__channel:{rj:force}", 1, 5000));
    rh_sleep_ms(100);
    r = rj_call(g_peer, "f2", "force lock %s", name);
    assert_string_equal(strtok(r, " "), "true");
    double java_forced = strtod(strtok(NULL, " "), NULL);
    free(r);
    assert_int_equal(tc_holder_join(&h), RLOCK_OK);
    double to_c = (double)h.got_at - java_forced;
    print_message("rlock force unlock -> Redisson grant %.1f ms; Redisson forceUnlock -> rlock "
                  "grant %.1f ms\n",
                  to_java, to_c);
    assert_true(to_java < MESSAGE_MS && to_c < MESSAGE_MS); /* the 60 s leases did not run out */
    rj_expect(g_peer, "f1", "err", "unlock lock %s", name); /* f1's hold was forced away */
    tc_close_own(l, c);
}

/* ---- watchdogs, inspect, fencing tokens ----------------------------------------------------- */

/* Redisson's watchdog (lockWatchdogTimeout 1.5 s) keeps a Java hold alive for 3 of its periods
 * while rlock waits on it, and rlock's watchdog (1.5 s) keeps an rlock hold alive for 3 periods
 * while a Redisson thread waits; both at once, on two names. */
static void test_watchdogs_hold_across_periods(void **state)
{
    (void)state;
    rj_expect(g_peer, "d1", "ok", "lock lock rj:wd:java -1");
    rlock_client *cw = tc_client_tuned(g_srv, JAVA_WATCHDOG_MS, 0, NULL, NULL);
    rlock *mine = tc_hold(cw, RLOCK_REENTRANT, "rj:wd:c");
    int id = rj_send(g_peer, "d2", "try lock rj:wd:c %d -1", 3 * JAVA_WATCHDOG_MS);
    rlock_client *c;
    rlock *l = rj_open_own(g_srv, RLOCK_REENTRANT, "rj:wd:java", &c);
    assert_int_equal(rlock_try_lock(l, 3 * JAVA_WATCHDOG_MS, -1), RLOCK_ETIMEDOUT);
    char *r = rj_wait(g_peer, id, 15000);
    assert_non_null(r);
    assert_int_equal(r[0], '0');
    free(r);
    assert_int_equal(rlock_is_locked(l), 1);
    assert_true(rlock_remaining_ttl_ms(l) > 0);
    rj_expect(g_peer, "d1", "ok", "unlock lock rj:wd:java");
    tc_lock_unlock(l, 1000, -1);
    assert_int_equal(rlock_is_held(mine), 1);
    assert_int_equal(rlock_unlock(mine), RLOCK_OK);
    rj_expect(g_peer, "d2", "1", "try lock rj:wd:c 1000 -1");
    rj_expect(g_peer, "d2", "ok", "unlock lock rj:wd:c");
    rlock_free(mine);
    rlock_client_free(cw);
    tc_close_own(l, c);
}

/* ---- owners (rlock_lock_ex) ----------------------------------------------------------------- */

typedef struct owner_release {
    rlock *l;
    rlock_owner *o;
} owner_release;

static int owner_unlock(void *arg)
{
    owner_release *u = arg;
    return rlock_unlock_ex(u->l, u->o);
}

/* An owner's hold is an ordinary hold to Redisson: isLocked() says so and tryLock() fails; its
 * release from another thread than the one that took it wakes a waiting Redisson thread. The
 * reentrant lock, the fair lock and the write side. */
static void test_owner_holds_seen_by_redisson(void **state)
{
    (void)state;
    static const struct {
        const char *java;
        rlock_kind kind;
    } types[] = {{"lock", RLOCK_REENTRANT}, {"fair", RLOCK_FAIR}, {"write", RLOCK_WRITE}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "rj:owner:%s", types[i].java);
        rlock_client *c;
        rlock *l = rj_open_own(g_srv, types[i].kind, name, &c);
        owner_release u = {l, NULL};
        assert_int_equal(rlock_owner_new(c, &u.o), RLOCK_OK);
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.owner = u.o;
        a.wait_ms = 0;
        assert_int_equal(rlock_lock_ex(l, &a), RLOCK_OK);
        rj_expect(g_peer, "o1", "1", "locked %s %s", types[i].java, name);
        rj_expect(g_peer, "o1", "0", "try %s %s 0 -1", types[i].java, name);
        int id = rj_send(g_peer, "o1", "try %s %s 10000 -1", types[i].java, name);
        rh_sleep_ms(200); /* the Redisson thread waits */
        tc_bg bg;
        tc_bg_start(&bg, owner_unlock, &u);
        assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
        char *r = rj_wait(g_peer, id, 15000);
        assert_non_null(r);
        assert_int_equal(r[0], '1');
        free(r);
        rj_expect(g_peer, "o1", "ok", "unlock %s %s", types[i].java, name);
        rlock_owner_free(u.o);
        tc_close_own(l, c);
    }
}

/* rlock_inspect() shows a Redisson holder: its "<redisson id>:<thread id>" field, count 2. */
static void test_inspect_shows_java_holder(void **state)
{
    (void)state;
    rj_expect(g_peer, "i1", "ok", "lock lock rj:inspect -1");
    rj_expect(g_peer, "i1", "ok", "lock lock rj:inspect -1");
    char *owner = rj_call(g_peer, "i1", "owner");
    rlock_client *c = rj_client(g_srv);
    rlock_lock_info *info = NULL;
    assert_int_equal(rlock_inspect(c, "rj:inspect", &info), RLOCK_OK);
    assert_int_equal(info->type, RLOCK_TYPE_REENTRANT);
    assert_int_equal(info->locked, 1);
    assert_int_equal(info->n_holders, 1);
    assert_string_equal(info->holders[0].owner, owner);
    assert_int_equal(info->holders[0].count, 2);
    assert_true(info->ttl_ms > 0 && info->ttl_ms <= JAVA_WATCHDOG_MS);
    rlock_lock_info_free(info);
    free(owner);
    rj_expect(g_peer, "i1", "ok", "unlock lock rj:inspect");
    rj_expect(g_peer, "i1", "ok", "unlock lock rj:inspect");
    rlock_client_free(c);
}

/* RFencedLock and rlock's reentrant lock on one name draw from one redisson_lock_token:{name}:
 * 10 rounds alternating sides, tokens strictly increasing. */
static void test_fenced_tokens_shared(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = rj_open_own(g_srv, RLOCK_REENTRANT, "rj:fenced", &c);
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        char *r = rj_call(g_peer, "t1", "try fenced rj:fenced 5000 -1");
        unsigned long long token = 0;
        assert_int_equal(sscanf(r, "1 %*f %llu", &token), 1);
        free(r);
        rj_expect(g_peer, "t1", "ok", "unlock fenced rj:fenced");
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        uint64_t mine = rlock_token(l);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        print_message("round %d: Redisson token %llu, rlock token %" PRIu64 "\n", i, token, mine);
        assert_true(token > last);
        assert_true(mine > token);
        last = mine;
    }
    tc_close_own(l, c);
}

/* ---- the fair queue ------------------------------------------------------------------------- */

static rh_server *standalone(const char *key)
{
    (void)key;
    return g_srv;
}

typedef rjc_fair_result fair_result;

/* rjc_fair_queue() on the program's server, with a client of its own. */
static fair_result fair_queue(const char *name, char holder, const char *pattern, int64_t wait_ms)
{
    rjc_fair_env e = {.p = g_peer, .c = rj_client(g_srv), .queue_server = standalone};
    fair_result r = rjc_fair_queue(&e, name, holder, pattern, wait_ms);
    rlock_client_free(e.c);
    return r;
}

/* Queues of one side behind the other side's holder keep arrival order exactly. */
static void test_fair_one_side_queues(void **state)
{
    (void)state;
    fair_result r = fair_queue("rj:fair:c", 'j', "cccccccccc", 20000);
    assert_int_equal(r.inversions, 0);
    assert_int_equal(r.not_granted_c, 0);
    r = fair_queue("rj:fair:j", 'c', "jjjjjjjjjj", 20000);
    assert_int_equal(r.inversions, 0);
    assert_int_equal(r.not_granted_j, 0);
}

/* One Redisson waiter at the head of a queue of rlock waiters: its grant subtracts Redisson's
 * 300 s from the rlock waiters' deadlines (the first way of losing order) and notifies none of
 * them (the fourth); rlock waiters behind it are all served, with the delay and inversions
 * these cause (docs/compatibility.md). */
static void test_fair_redisson_head(void **state)
{
    (void)state;
    fair_result r = fair_queue("rj:fair:head", 'c', "jcccccccc", 20000);
    assert_int_equal(r.not_granted_c, 0);
    assert_int_equal(r.not_granted_j, 0);
}

/* A mixed queue of 20 (rlock and Redisson alternating): exclusion holds and every rlock waiter is
 * served, but order is lost (docs/compatibility.md, "Fair lock"): each Redisson grant subtracts
 * Redisson's 300 s wait timeout from every score, which puts rlock's deadlines (and the Redisson
 * waiters' queued behind them) in the past, so the next acquire purges them. Purged rlock waiters
 * rejoin; purged Redisson waiters are not notified and wait out their tryLock. */
static void test_fair_mixed_queue(void **state)
{
    (void)state;
    fair_result r = fair_queue("rj:fair:mixed", 'c', "cjcjcjcjcjcjcjcjcjcj", 8000);
    assert_int_equal(r.not_granted_c, 0);
    /* The divergence itself: when this fails, order is kept and the doc must say so. */
    assert_true(r.inversions > 0 || r.not_granted_j > 0);
}

/* ---- RedissonMultiLock over names rlock clients take ------------------------------------- */

typedef struct member_thread {
    rlock_client *c;
    rlock *l[3];
    rlock *group; /* NULL: the single lock l[0] on checker slot slot */
    rj_checker *ck;
    int slot, failures;
} member_thread;

static void *member_run(void *arg)
{
    member_thread *t = arg;
    rlock *l = t->group != NULL ? t->group : t->l[0];
    for (int i = 0; i < 60; i++) {
        if (rlock_lock(l, -1) != RLOCK_OK) {
            t->failures++;
            continue;
        }
        for (int s = 0; s < 3; s++) {
            if (t->group != NULL || s == t->slot) {
                rj_ck_enter(t->ck, s);
            }
        }
        usleep(200);
        for (int s = 0; s < 3; s++) {
            if (t->group != NULL || s == t->slot) {
                rj_ck_leave(t->ck, s);
            }
        }
        t->failures += rlock_unlock(l) != RLOCK_OK;
    }
    return NULL;
}

/* Two Redisson threads take RedissonMultiLock(rj:m:0, rj:m:1, rj:m:2) while three rlock threads
 * take one member each and a fourth takes rlock's multi-lock over all three: no two holders of
 * one member inside at once. */
static void test_multilock_exclusion(void **state)
{
    (void)state;
    char path[64];
    rj_checker *ck = rj_checker_new(path);
    assert_non_null(ck);
    const char *names[3] = {"rj:m:0", "rj:m:1", "rj:m:2"};
    member_thread t[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        t[k] = (member_thread){.c = rj_client(g_srv), .ck = ck, .slot = k};
        for (int m = 0; m < 3; m++) {
            t[k].l[m] = tc_open(t[k].c, RLOCK_REENTRANT, names[k == 3 ? m : k]);
        }
        t[k].group = k == 3 ? rlock_multi_new(t[k].l, 3) : NULL;
    }
    int ids[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = rj_send(g_peer, i == 0 ? "m0" : "m1", "mstress 40 200 %s %s %s %s", path, names[0],
                         names[1], names[2]);
    }
    for (int k = 0; k < 4; k++) {
        pthread_create(&th[k], NULL, member_run, &t[k]);
    }
    for (int i = 0; i < 2; i++) {
        char *r = rj_wait(g_peer, ids[i], 120000);
        assert_non_null(r);
        assert_string_equal(r, "ok 40");
        free(r);
    }
    long long violations = 0, entries = 0;
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(t[k].failures, 0);
        rlock_free(t[k].group);
        for (int m = 0; m < 3; m++) {
            rlock_free(t[k].l[m]);
        }
        rlock_client_free(t[k].c);
    }
    for (int s = 0; s < 3; s++) {
        violations += atomic_load(&ck->slot[s].violations);
        entries += atomic_load(&ck->slot[s].entries);
    }
    print_message("multi-lock: %lld member sections, %lld violations\n", entries, violations);
    assert_int_equal(violations, 0);
    /* Per member: 2 x 40 Redisson groups, 60 of its single rlock thread, 60 rlock groups. */
    assert_int_equal(entries, 3 * (80 + 60 + 60));
    rj_checker_free(ck, path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_shows_java_holder),
        cmocka_unit_test(test_owner_holds_seen_by_redisson),
        cmocka_unit_test(test_wakeups_both_ways),
        cmocka_unit_test(test_force_unlock_wakes_other_side),
        cmocka_unit_test(test_watchdogs_hold_across_periods),
        cmocka_unit_test(test_fenced_tokens_shared),
        cmocka_unit_test(test_lock_mixed_stress),
        cmocka_unit_test(test_fair_one_side_queues),
        cmocka_unit_test(test_fair_redisson_head),
        cmocka_unit_test(test_fair_mixed_queue),
        cmocka_unit_test(test_rw_java_readers_c_writers),
        cmocka_unit_test(test_rw_java_writers_c_readers),
        cmocka_unit_test(test_multilock_exclusion),
    };
    /* RJ_TEST=<glob> runs the matching tests only (for a look at one case). */
    if (getenv("RJ_TEST") != NULL) {
        cmocka_set_test_filter(getenv("RJ_TEST"));
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
