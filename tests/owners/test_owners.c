/*
 * Owners (rlock_owner) on every lock type and both groups: a hold taken on one thread is released
 * on another; two owners exclude each other in one thread; re-entry is counted per owner; the
 * owner's field on Redis is "<client-uuid>:<n>" with n outside the thread ids; rlock_extend never
 * shortens and reports RLOCK_ELOST for a gone hold; a per-hold on_lost fires once from the
 * watchdog beside the client-wide one; an owner freed while holding keeps its watchdog hold
 * renewed until its handle is freed; a fork child forgets the parent's owner holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "owners_util.h"
#include "tc_thread.h"

#define WATCHDOG_MS 600

static rh_server *g_srv;
static rlock_client *g_c;
static atomic_int g_client_lost;

static void client_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&g_client_lost, 1);
}

static int setup(void **state)
{
    (void)state;
    if (tc_fixture_open(&g_srv, NULL, NULL) != 0) {
        return -1;
    }
    g_c = tc_client_ex(g_srv, WATCHDOG_MS, 0, client_lost, NULL);
    return g_c != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return tc_fixture_close(&g_srv, &g_c);
}

static long long int_exists(const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(g_srv, argv);
}

static rlock_owner *owner(void)
{
    rlock_owner *o = NULL;
    assert_int_equal(rlock_owner_new(g_c, &o), RLOCK_OK);
    return o;
}

static int lock_as(rlock *l, rlock_owner *o, int64_t wait_ms, int64_t lease_ms)
{
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = o;
    a.wait_ms = wait_ms;
    a.lease_ms = lease_ms;
    return rlock_lock_ex(l, &a);
}

typedef struct handoff {
    rlock *l;
    rlock_owner *o;
} handoff;

static int take(void *arg)
{
    handoff *h = arg;
    return lock_as(h->l, h->o, 5000, -1);
}

static int give(void *arg)
{
    handoff *h = arg;
    int held = rlock_is_held_by(h->l, h->o);
    int r = rlock_unlock_ex(h->l, h->o);
    return held == 1 ? r : -100 - held;
}

/* Lock on thread A, unlock on thread B, for every subject; the lock is free afterwards and the
 * test thread never counted as its holder. */
static void test_handoff(void **state)
{
    (void)state;
    for (int w = 0; w < OW_SUBJECTS; w++) {
        ow_subject sj;
        ow_open(&sj, w, g_c, g_srv, "handoff", WATCHDOG_MS);
        handoff h = {sj.l, owner()};
        tc_bg a, b;
        tc_bg_start(&a, take, &h);
        assert_int_equal(tc_bg_join(&a), RLOCK_OK);
        assert_int_equal(rlock_is_held(sj.l), 0); /* the test thread is not the owner */
        assert_int_equal(ow_any_key(&sj, g_srv), 1);
        tc_bg_start(&b, give, &h);
        assert_int_equal(tc_bg_join(&b), RLOCK_OK);
        print_message("%s: handed off between threads\n", ow_label(w));
        assert_int_equal(ow_any_key(&sj, g_srv), 0);
        rlock_owner_free(h.o);
        ow_close(&sj);
    }
}

typedef struct via_other {
    rlock *other;
    rlock_owner *o;
} via_other;

static int give_via_other(void *arg)
{
    via_other *v = arg;
    int held = rlock_is_held_by(v->other, v->o);
    int ext = rlock_extend(v->other, v->o, 20000);
    int r = rlock_unlock_ex(v->other, v->o);
    return held == 1 && ext == RLOCK_OK ? r : -100;
}

/* An owner's hold taken through one handle is queried, extended and released on another thread
 * through another handle of the same lock. */
static void test_other_handle(void **state)
{
    (void)state;
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_SPIN, RLOCK_FAIR, RLOCK_READ,
                                       RLOCK_WRITE};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char name[32];
        snprintf(name, sizeof(name), "other-handle-%zu", k);
        rlock *l = tc_open(g_c, kinds[k], name);
        via_other v = {tc_open(g_c, kinds[k], name), owner()};
        assert_int_equal(lock_as(l, v.o, 0, 2000), RLOCK_OK);
        tc_bg b;
        tc_bg_start(&b, give_via_other, &v);
        assert_int_equal(tc_bg_join(&b), RLOCK_OK);
        assert_int_equal(rlock_unlock_ex(l, v.o), RLOCK_ENOTOWNER);
        assert_int_equal(int_exists(name), 0);
        rlock_owner_free(v.o);
        rlock_free(v.other);
        rlock_free(l);
    }
}

/* rlock_token_ex(): an owner's hold's fencing token, through the handle that took it and
 * through another handle of the same lock; the calling thread's (owner NULL) is its own, 0 here;
 * a later grant has a larger token; 0 once released, and for bad input. */
static void test_token_ex(void **state)
{
    (void)state;
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_WRITE};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char name[32];
        snprintf(name, sizeof(name), "token-ex-%zu", k);
        rlock *l = tc_open(g_c, kinds[k], name), *other = tc_open(g_c, kinds[k], name);
        rlock_owner *o = owner();
        assert_int_equal(lock_as(l, o, 0, 10000), RLOCK_OK);
        uint64_t t1 = rlock_token_ex(l, o);
        assert_true(t1 > 0);
        assert_int_equal(rlock_token_ex(other, o), t1);
        assert_int_equal(rlock_token_ex(l, NULL), 0);
        assert_int_equal(rlock_token(l), 0);
        assert_int_equal(rlock_unlock_ex(l, o), RLOCK_OK);
        assert_int_equal(rlock_token_ex(l, o), 0);
        assert_int_equal(lock_as(l, o, 0, 10000), RLOCK_OK);
        assert_true(rlock_token_ex(l, o) > t1);
        assert_int_equal(rlock_unlock_ex(l, o), RLOCK_OK);
        rlock_owner_free(o);
        rlock_free(other);
        rlock_free(l);
    }
    assert_int_equal(rlock_token_ex(NULL, NULL), 0);
    assert_non_null(strstr(rlock_last_error(), "must not be NULL"));
}

/* Two owners exclude each other in one thread, and the thread itself is a third party. */
static void test_two_owners_one_thread(void **state)
{
    (void)state;
    for (int w = 0; w < OW_SUBJECTS; w++) {
        ow_subject sj;
        ow_open(&sj, w, g_c, g_srv, "two", WATCHDOG_MS);
        rlock_owner *o1 = owner(), *o2 = owner();
        assert_int_equal(lock_as(sj.l, o1, 0, -1), RLOCK_OK);
        assert_int_equal(lock_as(sj.rival, o2, 0, -1), RLOCK_ETIMEDOUT);
        assert_int_equal(lock_as(sj.rival, o2, 150, -1), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_try_lock(sj.rival, 0, -1), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_unlock_ex(sj.rival, o2), RLOCK_ENOTOWNER);
        assert_int_equal(rlock_unlock(sj.l), RLOCK_ENOTOWNER);
        assert_int_equal(rlock_unlock_ex(sj.l, o1), RLOCK_OK);
        assert_int_equal(lock_as(sj.rival, o2, 0, -1), RLOCK_OK);
        assert_int_equal(rlock_unlock_ex(sj.rival, o2), RLOCK_OK);
        assert_int_equal(ow_any_key(&sj, g_srv), 0);
        rlock_owner_free(o1);
        rlock_owner_free(o2);
        ow_close(&sj);
    }
}

/* The owner's field on Redis: "<client-uuid>:<n>", n above every thread id, the count per owner. */
static void check_field(const ow_subject *sj, rlock_owner *o, const char *want)
{
    char field[128];
    const char *id = rlock_owner_id(o);
    snprintf(field, sizeof(field), "%s%s", id, sj->which == OW_WRITE ? ":write" : "");
    const char *argv[] = {"HGET", ow_key(sj), field, NULL};
    char *v = rh_cmd_str(g_srv, argv);
    assert_non_null(v);
    assert_string_equal(v, want);
    free(v);
}

static void test_reentry_per_owner(void **state)
{
    (void)state;
    rlock_owner *probe = owner();
    const char *id = rlock_owner_id(probe);
    size_t ul = strlen(rlock_client_id(g_c));
    assert_memory_equal(id, rlock_client_id(g_c), ul);
    assert_int_equal(id[ul], ':');
    assert_true(strtoull(id + ul + 1, NULL, 10) >= (1ULL << 52));
    rlock_owner_free(probe);
    for (int w = 0; w < OW_SUBJECTS; w++) {
        ow_subject sj;
        ow_open(&sj, w, g_c, g_srv, "reentry", WATCHDOG_MS);
        rlock_owner *o1 = owner(), *o2 = owner();
        assert_int_equal(lock_as(sj.l, o1, 0, -1), RLOCK_OK);
        assert_int_equal(lock_as(sj.l, o1, 0, 30000), RLOCK_OK);
        if (sj.n == 0 || sj.which == OW_MULTI) {
            check_field(&sj, o1, "2");
        }
        assert_int_equal(rlock_is_held_by(sj.l, o1), 1);
        assert_int_equal(rlock_is_held_by(sj.l, o2), 0);
        assert_int_equal(rlock_is_held_by(sj.l, NULL), 0);
        assert_int_equal(rlock_unlock_ex(sj.l, o1), RLOCK_OK);
        assert_int_equal(rlock_is_held_by(sj.l, o1), 1);
        assert_int_equal(rlock_unlock_ex(sj.l, o1), RLOCK_OK);
        assert_int_equal(rlock_is_held_by(sj.l, o1), 0);
        assert_int_equal(rlock_unlock_ex(sj.l, o1), RLOCK_ENOTOWNER);
        rlock_owner_free(o1);
        rlock_owner_free(o2);
        ow_close(&sj);
    }
}

static long long pttl(const char *key)
{
    const char *argv[] = {"PTTL", key, NULL};
    return rh_cmd_int(g_srv, argv);
}

/* A read hold's own timeout key, Redisson's {name}:<owner>:rwlock_timeout:1. */
static long long read_timeout_pttl(const ow_subject *sj, rlock_owner *o)
{
    char key[160];
    snprintf(key, sizeof(key), "{%s}:%s:rwlock_timeout:1", sj->name, rlock_owner_id(o));
    return pttl(key);
}

static void extend_one(int w)
{
    ow_subject sj;
    ow_open(&sj, w, g_c, g_srv, "extend", WATCHDOG_MS);
    rlock_owner *o = owner(), *other = owner();
    assert_int_equal(rlock_extend(sj.l, o, 1000), RLOCK_ENOTOWNER);
    assert_int_equal(lock_as(sj.l, o, 0, 1500), RLOCK_OK);
    assert_int_equal(rlock_extend(sj.l, o, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_extend(sj.l, other, 20000), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_extend(sj.l, o, 20000), RLOCK_OK);
    assert_true(pttl(ow_key(&sj)) > 15000);
    assert_int_equal(rlock_extend(sj.l, o, 1000), RLOCK_OK); /* never shorter */
    assert_true(pttl(ow_key(&sj)) > 15000);
    if (w == OW_READ) {
        assert_true(read_timeout_pttl(&sj, o) > 15000);
    }
    assert_int_equal(rlock_unlock_ex(sj.l, o), RLOCK_OK);
    /* A hold whose lease ran out: RLOCK_ELOST, and the record is gone with it. */
    assert_int_equal(lock_as(sj.l, o, 0, 150), RLOCK_OK);
    rh_sleep_ms(400);
    assert_int_equal(rlock_extend(sj.l, o, 5000), RLOCK_ELOST);
    assert_int_equal(rlock_unlock_ex(sj.l, o), RLOCK_ENOTOWNER);
    /* A watchdog hold can be extended too, and stays under the watchdog. */
    assert_int_equal(lock_as(sj.l, o, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_extend(sj.l, o, 5000), RLOCK_OK);
    assert_true(pttl(ow_key(&sj)) > 3000);
    assert_int_equal(rlock_unlock_ex(sj.l, o), RLOCK_OK);
    assert_int_equal(ow_any_key(&sj, g_srv), 0);
    print_message("%s: extend ok\n", ow_label(w));
    rlock_owner_free(o);
    rlock_owner_free(other);
    ow_close(&sj);
}

static void test_extend(void **state)
{
    (void)state;
    for (int w = 0; w < OW_SUBJECTS; w++) {
        extend_one(w);
    }
    /* The calling thread's hold (owner NULL) extends as well. */
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "extend-thread");
    assert_int_equal(rlock_lock(l, 1000), RLOCK_OK);
    assert_int_equal(rlock_extend(l, NULL, 30000), RLOCK_OK);
    assert_true(pttl("extend-thread") > 20000);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

typedef struct lost_seen {
    atomic_int calls;
    rlock *lock;
    pthread_t thread; /* who called: the watchdog thread, not the test's */
} lost_seen;

static void hold_lost(rlock *lock, void *user)
{
    lost_seen *s = user;
    s->lock = lock;
    s->thread = pthread_self();
    atomic_fetch_add(&s->calls, 1);
}

static void delete_keys(const ow_subject *sj)
{
    for (size_t i = 0; i < (sj->n == 0 ? 1 : sj->n); i++) {
        char key[96];
        snprintf(key, sizeof(key), sj->n == 0 ? "%s" : "%s:%zu", sj->name, i);
        const char *argv[] = {"DEL", key, NULL};
        (void)rh_cmd_int(g_srv, argv);
    }
}

/* The per-hold on_lost fires once, with the handle, and the client-wide one fires too. */
static void test_on_lost(void **state)
{
    (void)state;
    for (int w = 0; w < OW_SUBJECTS; w++) {
        ow_subject sj;
        ow_open(&sj, w, g_c, g_srv, "lost", WATCHDOG_MS);
        rlock_owner *o = owner();
        lost_seen seen = {0};
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.owner = o;
        a.on_lost = hold_lost;
        a.user_data = &seen;
        int before = atomic_load(&g_client_lost);
        assert_int_equal(rlock_lock_ex(sj.l, &a), RLOCK_OK);
        delete_keys(&sj);
        for (int i = 0; i < 300 && atomic_load(&seen.calls) == 0; i++) {
            rh_sleep_ms(10);
        }
        rh_sleep_ms(WATCHDOG_MS); /* two more renewal rounds: still once */
        assert_int_equal(atomic_load(&seen.calls), 1);
        assert_ptr_equal(seen.lock, sj.l);
        assert_false(pthread_equal(seen.thread, pthread_self()));
        assert_true(atomic_load(&g_client_lost) > before);
        print_message("%s: per-hold on_lost once\n", ow_label(w));
        assert_int_equal(rlock_unlock_ex(sj.l, o), RLOCK_ELOST);
        rlock_owner_free(o);
        ow_close(&sj);
    }
}

/* rlock_owner_free() releases nothing: a watchdog hold stays renewed across three watchdog
 * periods, and ends within a lease once its handle is freed. */
static void test_watchdog_after_owner_free(void **state)
{
    (void)state;
    const int kinds[] = {OW_REENTRANT, OW_READ};
    for (size_t k = 0; k < 2; k++) {
        ow_subject sj;
        ow_open(&sj, kinds[k], g_c, g_srv, "kept", WATCHDOG_MS);
        rlock_owner *o = owner();
        assert_int_equal(lock_as(sj.l, o, 0, -1), RLOCK_OK);
        rlock_owner_free(o);
        rh_sleep_ms(3 * WATCHDOG_MS + 200);
        assert_int_equal(ow_any_key(&sj, g_srv), 1);
        assert_int_equal(rlock_try_lock(sj.rival, 0, 1000), RLOCK_ETIMEDOUT);
        ow_subject keys = sj; /* its name, for the checks after the close */
        int64_t t0 = rh_now_ms();
        ow_close(&sj); /* the handle goes: nobody renews the hold any more */
        assert_int_equal(ow_any_key(&keys, g_srv), 1);
        while (ow_any_key(&keys, g_srv) && rh_now_ms() - t0 < 3 * WATCHDOG_MS) {
            rh_sleep_ms(20);
        }
        assert_int_equal(ow_any_key(&keys, g_srv), 0);
        print_message(
            "%s: kept 3 periods after the owner's free, gone %lld ms after the handle's\n",
            ow_label(kinds[k]), (long long)(rh_now_ms() - t0));
    }
}

/* A fork child forgets the parent's owner holds, as it forgets thread holds. */
static void test_fork(void **state)
{
    (void)state;
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "fork-owner");
    rlock_owner *o = owner();
    assert_int_equal(lock_as(l, o, 0, -1), RLOCK_OK);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = rlock_is_held_by(l, o) != 0;
        bad |= (lock_as(l, o, 0, -1) != RLOCK_ETIMEDOUT) << 1;
        bad |= (rlock_unlock_ex(l, o) != RLOCK_ENOTOWNER) << 2;
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(rlock_is_held_by(l, o), 1);
    assert_int_equal(rlock_unlock_ex(l, o), RLOCK_OK);
    rlock_owner_free(o);
    rlock_free(l);
}

static void test_bad_input(void **state)
{
    (void)state;
    rlock_owner *o = NULL;
    assert_int_equal(rlock_owner_new(NULL, &o), RLOCK_EINVAL);
    assert_int_equal(rlock_owner_new(g_c, NULL), RLOCK_EINVAL);
    assert_string_equal(rlock_owner_id(NULL), "");
    rlock_owner_free(NULL);
    rlock_lock_args_init(NULL);
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "bad-input");
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    assert_int_equal(a.wait_ms, RLOCK_WAIT_FOREVER);
    assert_int_equal(a.lease_ms, -1);
    assert_int_equal(rlock_lock_ex(NULL, &a), RLOCK_EINVAL);
    assert_int_equal(rlock_lock_ex(l, NULL), RLOCK_EINVAL);
    a.reserved[0] = &a;
    assert_int_equal(rlock_lock_ex(l, &a), RLOCK_EINVAL);
    a.reserved[0] = NULL;
    a.wait_ms = -5;
    assert_int_equal(rlock_lock_ex(l, &a), RLOCK_EINVAL);
    a.wait_ms = 0;
    a.lease_ms = 0;
    assert_int_equal(rlock_lock_ex(l, &a), RLOCK_EINVAL);
    /* An owner of another client. */
    rlock_client *other = tc_client_ex(g_srv, 0, 0, NULL, NULL);
    assert_int_equal(rlock_owner_new(other, &o), RLOCK_OK);
    a.lease_ms = -1;
    a.owner = o;
    assert_int_equal(rlock_lock_ex(l, &a), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock_ex(l, o), RLOCK_EINVAL);
    assert_int_equal(rlock_extend(l, o, 1000), RLOCK_EINVAL);
    assert_int_equal(rlock_is_held_by(l, o), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock_ex(NULL, NULL), RLOCK_EINVAL);
    assert_int_equal(rlock_extend(NULL, NULL, 1000), RLOCK_EINVAL);
    rlock_owner_free(o);
    rlock_client_free(other);
    rlock_free(l);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_handoff),
        cmocka_unit_test(test_other_handle),
        cmocka_unit_test(test_token_ex),
        cmocka_unit_test(test_two_owners_one_thread),
        cmocka_unit_test(test_reentry_per_owner),
        cmocka_unit_test(test_extend),
        cmocka_unit_test(test_on_lost),
        cmocka_unit_test(test_watchdog_after_owner_free),
    };
    /* TSan does not support a child that starts threads after fork(): --no-fork there. */
    const struct CMUnitTest fork_tests[] = {cmocka_unit_test(test_fork)};
    int no_fork = argc > 1 && strcmp(argv[1], "--no-fork") == 0;
    const struct CMUnitTest *all = tests;
    int r = cmocka_run_group_tests(tests, setup, teardown);
    (void)all;
    return no_fork ? r : r + cmocka_run_group_tests(fork_tests, setup, teardown);
}
