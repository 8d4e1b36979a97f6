/*
 * rlock/libevent.h - a loop client on a libevent event_base (header-only; the library links no
 * libevent).
 *
 *   rlock_client *c;
 *   int rc = rlock_libevent_client_new(&opts, base, &c);
 *
 * The client is an ordinary loop client (rlock_async.h), freed with rlock_client_free(), which
 * frees its events at once. The base must outlive the client.
 */
#ifndef RLOCK_LIBEVENT_H
#define RLOCK_LIBEVENT_H

#include <event2/event.h>
#include <stdlib.h>

#include "../rlock_async.h"

typedef struct rlock_ev_io {
    struct event *ev;
    struct event_base *base;
    evutil_socket_t fd;
    rlock_loop_io_fn cb;
    void *arg;
} rlock_ev_io;

typedef struct rlock_ev_timer {
    struct event *ev;
    rlock_loop_timer_fn cb;
    void *arg;
} rlock_ev_timer;

static inline void rlock_ev_on_io(evutil_socket_t fd, short what, void *arg)
{
    rlock_ev_io *w = (rlock_ev_io *)arg;
    (void)fd;
    w->cb(w->arg,
          ((what & EV_READ) ? RLOCK_LOOP_READ : 0) | ((what & EV_WRITE) ? RLOCK_LOOP_WRITE : 0));
}

static inline void *rlock_ev_io_new(void *loop_data, int fd, rlock_loop_io_fn cb, void *arg)
{
    rlock_ev_io *w = (rlock_ev_io *)calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    w->base = (struct event_base *)loop_data;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    w->ev = event_new(w->base, fd, EV_PERSIST | EV_READ, rlock_ev_on_io, w);
    if (w->ev == NULL) {
        free(w);
        return NULL;
    }
    return w;
}

/* libevent fixes an event's flags when it is assigned: a change re-assigns the stopped event. */
static inline int rlock_ev_io_set(void *io, int events)
{
    rlock_ev_io *w = (rlock_ev_io *)io;
    (void)event_del(w->ev);
    if (events == 0) {
        return 0;
    }
    short flags = (short)(EV_PERSIST | ((events & RLOCK_LOOP_READ) ? EV_READ : 0) |
                          ((events & RLOCK_LOOP_WRITE) ? EV_WRITE : 0));
    if (event_assign(w->ev, w->base, w->fd, flags, rlock_ev_on_io, w) != 0) {
        return -1;
    }
    return event_add(w->ev, NULL);
}

static inline void rlock_ev_io_free(void *io)
{
    rlock_ev_io *w = (rlock_ev_io *)io;
    event_free(w->ev);
    free(w);
}

static inline void rlock_ev_on_timer(evutil_socket_t fd, short what, void *arg)
{
    rlock_ev_timer *w = (rlock_ev_timer *)arg;
    (void)fd;
    (void)what;
    w->cb(w->arg);
}

static inline void *rlock_ev_timer_new(void *loop_data, rlock_loop_timer_fn cb, void *arg)
{
    rlock_ev_timer *w = (rlock_ev_timer *)calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    w->cb = cb;
    w->arg = arg;
    w->ev = evtimer_new((struct event_base *)loop_data, rlock_ev_on_timer, w);
    if (w->ev == NULL) {
        free(w);
        return NULL;
    }
    return w;
}

static inline int rlock_ev_timer_start(void *timer, int64_t delay_ms)
{
    rlock_ev_timer *w = (rlock_ev_timer *)timer;
    int64_t ms = delay_ms < 0 ? 0 : delay_ms;
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return evtimer_add(w->ev, &tv);
}

static inline void rlock_ev_timer_stop(void *timer)
{
    (void)evtimer_del(((rlock_ev_timer *)timer)->ev);
}

static inline void rlock_ev_timer_free(void *timer)
{
    rlock_ev_timer *w = (rlock_ev_timer *)timer;
    event_free(w->ev);
    free(w);
}

/* A loop client on base: rlock_loop_client_new() with libevent's events. */
static inline int rlock_libevent_client_new(const rlock_options *opts, struct event_base *base,
                                            rlock_client **out)
{
    rlock_loop l = {0};
    l.loop_data = base;
    l.io_new = rlock_ev_io_new;
    l.io_set = rlock_ev_io_set;
    l.io_free = rlock_ev_io_free;
    l.timer_new = rlock_ev_timer_new;
    l.timer_start = rlock_ev_timer_start;
    l.timer_stop = rlock_ev_timer_stop;
    l.timer_free = rlock_ev_timer_free;
    return rlock_loop_client_new(opts, &l, out);
}

#endif
