#include "tc_thread.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "tc_redis.h"

static void *bg_main(void *p)
{
    tc_bg *b = p;
    int r = b->call(b->arg);
    b->done_at = rh_now_ms();
    atomic_store(&b->result, r);
    return NULL;
}

int tc_threads_run(int n, void *(*run)(void *arg), void *args, size_t size)
{
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    int started = 0;
    while (t != NULL && started < n &&
           pthread_create(&t[started], NULL, run, (char *)args + (size_t)started * size) == 0) {
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
    }
    free(t);
    return started;
}

void tc_bg_start(tc_bg *b, int (*call)(void *arg), void *arg)
{
    b->call = call;
    b->arg = arg;
    b->done_at = 0;
    atomic_init(&b->result, TC_BG_RUNNING);
    if (pthread_create(&b->thread, NULL, bg_main, b) != 0) {
        fail_msg("tc_bg_start: pthread_create failed");
    }
}

int tc_bg_join(tc_bg *b)
{
    pthread_join(b->thread, NULL);
    return atomic_load(&b->result);
}

static void *holder_main(void *p)
{
    tc_holder *h = p;
    h->rc = h->wait_ms < 0 ? rlock_lock(h->l, h->lease_ms)
                           : rlock_try_lock(h->l, h->wait_ms, h->lease_ms);
    h->got_at = rh_now_ms();
    if (h->order != NULL) {
        h->place = atomic_fetch_add(h->order, 1);
    }
    /* The token before got: a reader that saw got sees the token too. */
    h->token = h->rc == RLOCK_OK ? rlock_token(h->l) : 0;
    atomic_store(&h->got, 1);
    if (h->rc != RLOCK_OK) {
        return NULL;
    }
    if (h->hold_ms >= 0) {
        rh_sleep_ms(h->hold_ms);
    }
    while (h->hold_ms < 0 && !atomic_load(&h->release)) {
        rh_sleep_ms(1);
    }
    h->unlock_rc = rlock_unlock(h->l);
    return NULL;
}

void tc_holder_start(tc_holder *h, rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t hold_ms)
{
    tc_holder_start_ranked(h, NULL, l, wait_ms, lease_ms, hold_ms);
}

void tc_holder_start_ranked(tc_holder *h, atomic_int *order, rlock *l, int64_t wait_ms,
                            int64_t lease_ms, int64_t hold_ms)
{
    h->order = order;
    h->l = l;
    h->wait_ms = wait_ms;
    h->lease_ms = lease_ms;
    h->hold_ms = hold_ms;
    h->rc = TC_BG_RUNNING;
    h->unlock_rc = RLOCK_OK;
    h->place = -1;
    h->token = 0;
    h->got_at = 0;
    atomic_init(&h->got, 0);
    atomic_init(&h->release, 0);
    h->started_at = rh_now_ms();
    if (pthread_create(&h->thread, NULL, holder_main, h) != 0) {
        fail_msg("tc_holder_start: pthread_create failed");
    }
}

int tc_holder_wait(tc_holder *h, int64_t ms)
{
    int64_t deadline = rh_now_ms() + ms;
    while (!atomic_load(&h->got)) {
        if (rh_now_ms() >= deadline) {
            return TC_BG_RUNNING;
        }
        rh_sleep_ms(1);
    }
    return h->rc;
}

int tc_holder_join(tc_holder *h)
{
    atomic_store(&h->release, 1);
    pthread_join(h->thread, NULL);
    return h->rc != RLOCK_OK ? h->rc : h->unlock_rc;
}

int tc_holder_run(tc_holder *h, rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t hold_ms)
{
    tc_holder_start(h, l, wait_ms, lease_ms, hold_ms);
    return tc_holder_join(h);
}

void tc_assert_grant_survives_pubsub_kill(struct rh_server *srv, rlock *h, const char *name,
                                          tc_holder *w, uint64_t token0)
{
    const char *kill_cmd[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
    assert_true(rh_cmd_int(srv, kill_cmd) >= 1);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(tc_holder_wait(w, 10000), RLOCK_OK);
    assert_int_equal(w->token, token0 + 1);
    assert_int_equal(tc_hash_only_value(srv, name), 1);
}
