/*
 * The loop tests' libuv loop (loop_uv.h).
 */
#include <stdlib.h>

#include "tl_loop.h"
#include "rlock/libuv.h"

struct tu_loop {
    uv_loop_t uv;
    uv_timer_t tick;
};

typedef struct tu_after_rec {
    uv_timer_t t;
    void (*fn)(void *);
    void *arg;
} tu_after_rec;

static void tu_tick(uv_timer_t *t)
{
    (void)t;
}

tu_loop *tu_loop_new(void)
{
    tu_loop *l = calloc(1, sizeof(*l));
    if (l == NULL || uv_loop_init(&l->uv) != 0) {
        free(l);
        return NULL;
    }
    uv_timer_init(&l->uv, &l->tick);
    uv_timer_start(&l->tick, tu_tick, 5, 5);
    return l;
}

int tu_client_new(tu_loop *l, const rlock_options *opts, rlock_client **out)
{
    return rlock_libuv_client_new(opts, &l->uv, out);
}

static int64_t tu_now(tu_loop *l)
{
    uv_update_time(&l->uv);
    return (int64_t)uv_now(&l->uv);
}

int tu_run_until(tu_loop *l, const int *calls, int want, int64_t ms)
{
    int64_t end = tu_now(l) + ms;
    while (*calls < want && tu_now(l) < end) {
        uv_run(&l->uv, UV_RUN_ONCE);
    }
    return *calls >= want;
}

static void tu_after_closed(uv_handle_t *h)
{
    free(h->data);
}

static void tu_after_fire(uv_timer_t *t)
{
    tu_after_rec *a = t->data;
    a->fn(a->arg);
    uv_close((uv_handle_t *)&a->t, tu_after_closed);
}

void tu_after(tu_loop *l, int64_t ms, void (*fn)(void *), void *arg)
{
    tu_after_rec *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        abort();
    }
    a->fn = fn;
    a->arg = arg;
    uv_timer_init(&l->uv, &a->t);
    a->t.data = a;
    uv_timer_start(&a->t, tu_after_fire, (uint64_t)ms, 0);
}

int tu_loop_close(tu_loop *l)
{
    uv_close((uv_handle_t *)&l->tick, NULL);
    uv_run(&l->uv, UV_RUN_DEFAULT);
    int r = uv_loop_close(&l->uv);
    if (r == 0) {
        free(l);
    }
    return r;
}
