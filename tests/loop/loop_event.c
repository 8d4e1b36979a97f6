/*
 * The loop tests' libevent loop (tl_loop.h).
 */
#include <stdlib.h>

#include "rlock/libevent.h"
#include "tl_loop.h"

struct tu_loop {
    struct event_base *base;
    struct event *tick;
};

typedef struct tu_after_rec {
    struct event *ev;
    void (*fn)(void *);
    void *arg;
} tu_after_rec;

static void tu_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

tu_loop *tu_loop_new(void)
{
    tu_loop *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->base = event_base_new()) == NULL) {
        free(l);
        return NULL;
    }
    struct timeval tv = {0, 5000};
    l->tick = event_new(l->base, -1, EV_PERSIST, tu_tick, NULL);
    event_add(l->tick, &tv);
    return l;
}

int tu_client_new(tu_loop *l, const rlock_options *opts, rlock_client **out)
{
    return rlock_libevent_client_new(opts, l->base, out);
}

static int64_t tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tu_run_until(tu_loop *l, const int *calls, int want, int64_t ms)
{
    int64_t end = tu_now() + ms;
    while (*calls < want && tu_now() < end) {
        event_base_loop(l->base, EVLOOP_ONCE);
    }
    return *calls >= want;
}

static void tu_after_fire(evutil_socket_t fd, short what, void *arg)
{
    tu_after_rec *a = arg;
    (void)fd;
    (void)what;
    a->fn(a->arg);
    event_free(a->ev);
    free(a);
}

void tu_after(tu_loop *l, int64_t ms, void (*fn)(void *), void *arg)
{
    tu_after_rec *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        abort();
    }
    a->fn = fn;
    a->arg = arg;
    a->ev = evtimer_new(l->base, tu_after_fire, a);
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    evtimer_add(a->ev, &tv);
}

int tu_loop_close(tu_loop *l)
{
    event_free(l->tick);
    int left = event_base_get_num_events(l->base, EVENT_BASE_COUNT_ADDED);
    event_base_free(l->base);
    free(l);
    return left;
}
