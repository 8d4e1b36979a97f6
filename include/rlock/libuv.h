/*
 * rlock/libuv.h - a loop client on a libuv loop (header-only; the library links no libuv).
 *
 *   rlock_client *c;
 *   int rc = rlock_libuv_client_new(&opts, uv_default_loop(), &c);
 *
 * The client is an ordinary loop client (rlock_async.h), freed with rlock_client_free(). Its
 * handles close asynchronously, as libuv's do: run the loop once more after the free (for
 * instance until uv_run() returns) before closing the loop.
 */
#ifndef RLOCK_LIBUV_H
#define RLOCK_LIBUV_H

#include <stdlib.h>
#include <uv.h>

#include "../rlock_async.h"

typedef struct rlock_uv_io {
    uv_poll_t poll;
    rlock_loop_io_fn cb;
    void *arg;
} rlock_uv_io;

typedef struct rlock_uv_timer {
    uv_timer_t timer;
    rlock_loop_timer_fn cb;
    void *arg;
} rlock_uv_timer;

static inline void rlock_uv_free_handle(uv_handle_t *h)
{
    free(h->data);
}

static inline void rlock_uv_on_poll(uv_poll_t *p, int status, int events)
{
    rlock_uv_io *w = (rlock_uv_io *)p->data;
    int ev = 0;
    if (status < 0) {
        ev = RLOCK_LOOP_READ | RLOCK_LOOP_WRITE; /* the client's own read or write finds why */
    } else {
        ev |= (events & UV_READABLE) ? RLOCK_LOOP_READ : 0;
        ev |= (events & UV_WRITABLE) ? RLOCK_LOOP_WRITE : 0;
    }
    w->cb(w->arg, ev);
}

static inline void *rlock_uv_io_new(void *loop_data, int fd, rlock_loop_io_fn cb, void *arg)
{
    rlock_uv_io *w = (rlock_uv_io *)calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    if (uv_poll_init((uv_loop_t *)loop_data, &w->poll, fd) != 0) {
        free(w);
        return NULL;
    }
    w->poll.data = w;
    w->cb = cb;
    w->arg = arg;
    return w;
}

static inline int rlock_uv_io_set(void *io, int events)
{
    rlock_uv_io *w = (rlock_uv_io *)io;
    int flags = ((events & RLOCK_LOOP_READ) ? UV_READABLE : 0) |
                ((events & RLOCK_LOOP_WRITE) ? UV_WRITABLE : 0);
    return flags == 0 ? uv_poll_stop(&w->poll) : uv_poll_start(&w->poll, flags, rlock_uv_on_poll);
}

static inline void rlock_uv_io_free(void *io)
{
    rlock_uv_io *w = (rlock_uv_io *)io;
    (void)uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, rlock_uv_free_handle);
}

static inline void rlock_uv_on_timer(uv_timer_t *t)
{
    rlock_uv_timer *w = (rlock_uv_timer *)t->data;
    w->cb(w->arg);
}

static inline void *rlock_uv_timer_new(void *loop_data, rlock_loop_timer_fn cb, void *arg)
{
    rlock_uv_timer *w = (rlock_uv_timer *)calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    if (uv_timer_init((uv_loop_t *)loop_data, &w->timer) != 0) {
        free(w);
        return NULL;
    }
    w->timer.data = w;
    w->cb = cb;
    w->arg = arg;
    return w;
}

static inline int rlock_uv_timer_start(void *timer, int64_t delay_ms)
{
    rlock_uv_timer *w = (rlock_uv_timer *)timer;
    return uv_timer_start(&w->timer, rlock_uv_on_timer, (uint64_t)(delay_ms < 0 ? 0 : delay_ms), 0);
}

static inline void rlock_uv_timer_stop(void *timer)
{
    (void)uv_timer_stop(&((rlock_uv_timer *)timer)->timer);
}

static inline void rlock_uv_timer_free(void *timer)
{
    rlock_uv_timer *w = (rlock_uv_timer *)timer;
    (void)uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, rlock_uv_free_handle);
}

/* A loop client on loop: rlock_loop_client_new() with libuv's watchers and timers. */
static inline int rlock_libuv_client_new(const rlock_options *opts, uv_loop_t *loop,
                                         rlock_client **out)
{
    rlock_loop l = {0};
    l.loop_data = loop;
    l.io_new = rlock_uv_io_new;
    l.io_set = rlock_uv_io_set;
    l.io_free = rlock_uv_io_free;
    l.timer_new = rlock_uv_timer_new;
    l.timer_start = rlock_uv_timer_start;
    l.timer_stop = rlock_uv_timer_stop;
    l.timer_free = rlock_uv_timer_free;
    return rlock_loop_client_new(opts, &l, out);
}

#endif
