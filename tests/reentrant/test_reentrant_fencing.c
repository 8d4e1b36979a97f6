/*
 * Fencing tokens of the reentrant lock: every acquisition that takes the lock from free draws
 * the next value of redisson_lock_token:{name} in the same script, so tokens of one name
 * strictly increase in acquisition order, across threads, handles and clients; re-entry keeps
 * the holder's token; rlock_token() is 0 for a thread that holds nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "re_common.h"

static rh_server *g_srv;
static rlock_client *g_c;

TC_FIXTURE(g_srv, g_c, NULL)

static long long counter_of(const char *name)
{
    char key[128];
    re_token_key(name, key, sizeof(key));
    const char *get[] = {"GET", key, NULL};
    return rh_cmd_int(g_srv, get);
}

/* ---- strictly increasing across threads ------------------------------------------------- */

#define FT_THREADS 4
#define FT_ROUNDS  100
#define FT_NAME    "re:fence:mt"

typedef struct {
    rlock *l;
    _Atomic uint64_t *last; /* token of the previous critical section, whoever had it */
    int not_increasing, not_counter, errors;
} fencer;

static void *fencer_main(void *arg)
{
    fencer *f = arg;
    redisContext *ctx = rh_connect(g_srv);
    char key[128];
    re_token_key(FT_NAME, key, sizeof(key));
    const char *get[] = {"GET", key};
    for (int i = 0; i < FT_ROUNDS && ctx != NULL; i++) {
        if (rlock_lock(f->l, -1) != RLOCK_OK) {
            f->errors++;
            continue;
        }
        uint64_t tok = rlock_token(f->l);
        /* Critical sections are exclusive, so consecutive exchanges see consecutive grants. */
        uint64_t prev = atomic_exchange(f->last, tok);
        f->not_increasing += tok <= prev;
        f->not_counter += (long long)tok != tc_int(ctx, 2, get);
        if (rlock_unlock(f->l) != RLOCK_OK) {
            f->errors++;
        }
    }
    if (ctx == NULL) {
        f->errors++;
    } else {
        redisFree(ctx);
    }
    return NULL;
}

static void test_tokens_increase_across_threads(void **state)
{
    (void)state;
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, FT_NAME);
    _Atomic uint64_t last;
    atomic_init(&last, 0);
    fencer f[FT_THREADS];
    pthread_t t[FT_THREADS];
    for (int i = 0; i < FT_THREADS; i++) {
        f[i] = (fencer){.l = l, .last = &last};
        assert_int_equal(pthread_create(&t[i], NULL, fencer_main, &f[i]), 0);
    }
    for (int i = 0; i < FT_THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(f[i].errors, 0);
        assert_int_equal(f[i].not_increasing, 0);
        assert_int_equal(f[i].not_counter, 0);
    }
    /* One token per acquisition from free, the last one handed out last. */
    assert_int_equal(counter_of(FT_NAME), FT_THREADS * FT_ROUNDS);
    assert_int_equal(atomic_load(&last), FT_THREADS * FT_ROUNDS);
    rlock_free(l);
}

/* ---- re-entry and queries --------------------------------------------------------------- */

static void *token_of_other_thread(void *arg)
{
    return (void *)(uintptr_t)rlock_token(arg);
}

static void test_reentry_keeps_token(void **state)
{
    (void)state;
    const char *name = "re:fence:reentry";
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_token(l), 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    assert_true(t1 > 0);
    assert_int_equal((long long)t1, counter_of(name));
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 3);
    assert_int_equal(rlock_token(l), t1);
    assert_int_equal(counter_of(name), (long long)t1); /* re-entry drew no token */
    /* Another thread holds nothing, whatever this one holds. */
    assert_int_equal(re_run_thread(token_of_other_thread, l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), 0);
    /* Taken from free again: the next token. */
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1 + 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* The counter belongs to the name: other handles and other clients continue it, force unlock
 * and an expired lease do not reset it, and it never expires. */
static void test_counter_never_resets(void **state)
{
    (void)state;
    const char *name = "re:fence:counter";
    rlock *a = rlock_open(g_c, RLOCK_REENTRANT, name);
    rlock_client *c2 = re_client(g_srv);
    assert_non_null(c2);
    rlock *b = rlock_open(c2, RLOCK_REENTRANT, name);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t prev = 0;
    for (int i = 0; i < 6; i++) {
        rlock *l = (i % 2) ? b : a;
        if (i == 4) {
            assert_int_equal(rlock_lock(l, 100), RLOCK_OK); /* left to expire */
        } else {
            assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        }
        uint64_t tok = rlock_token(l);
        assert_true(tok > prev);
        prev = tok;
        if (i == 2) {
            assert_int_equal(rlock_force_unlock(l), 1);
            assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
        } else if (i == 4) {
            rh_sleep_ms(300);
            assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
        } else {
            assert_int_equal(rlock_unlock(l), RLOCK_OK);
        }
        assert_int_equal(rlock_token(l), 0);
    }
    assert_int_equal(counter_of(name), (long long)prev);
    char key[128];
    re_token_key(name, key, sizeof(key));
    const char *pttl[] = {"PTTL", key, NULL};
    redisReply *r = rh_cmd(g_srv, pttl);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, -1); /* exists, no expiry */
    freeReplyObject(r);
    rlock_free(a);
    rlock_free(b);
    rlock_client_free(c2);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_tokens_increase_across_threads),
        cmocka_unit_test(test_reentry_keeps_token), cmocka_unit_test(test_counter_never_resets))
