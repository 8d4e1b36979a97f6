/*
 * Event emission: each report updates the client's figures and, when a hook is set, becomes an
 * rlock_event handed to it on the reporting thread. Reports come from call sites that hold no
 * rlock mutex (observe.h), so the hook may call back into rlock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "context.h"
#include "error.h"
#include "observe.h"

void rlk_obs_init(rlk_obs *o)
{
    atomic_init(&o->hook, NULL);
    o->all = NULL;
    rlk_metrics_init(&o->m);
}

void rlk_obs_destroy(rlk_obs *o)
{
    while (o->all != NULL) {
        rlk_hook *h = o->all;
        o->all = h->older;
        free(h);
    }
    rlk_metrics_destroy(&o->m);
}

int64_t rlk_obs_now_ns(void)
{
#ifdef RLOCK_NO_METRICS
    return 0;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#endif
}

int rlk_obs_kind_of(rlock_kind k)
{
    switch (k) {
    case RLOCK_FAIR:
        return RLOCK_MK_FAIR;
    case RLOCK_READ:
        return RLOCK_MK_READ;
    case RLOCK_WRITE:
        return RLOCK_MK_WRITE;
    default: /* reentrant and spin share the reentrant lock's data and its label */
        return RLOCK_MK_REENTRANT;
    }
}

int rlk_obs_hooked(const rlock_client *c)
{
    return atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL;
}

#ifndef RLOCK_NO_METRICS
/* Hands ev to the hook, if any: the one branch a report without a hook costs. */
static void emit(rlock_client *c, const rlock_event *ev)
{
    rlk_hook *h = atomic_load_explicit(&c->obs.hook, memory_order_acquire);
    if (h != NULL) {
        h->fn(ev, h->user_data);
    }
}

static void relaxed_add(atomic_ullong *a, unsigned long long n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

static void gauge_add(atomic_llong *a, long long n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

static int result_index(int rc)
{
    if (rc == RLOCK_OK) {
        return 0;
    }
    if (rc == RLOCK_ETIMEDOUT) {
        return 1;
    }
    return rc == RLOCK_ECANCELED ? 2 : 3;
}

#endif

void rlk_obs_acquire_begin(rlock_client *c, rlk_obs_wait *w, int kind, const char *name,
                           const char *owner)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)w, (void)kind, (void)name, (void)owner;
#else
    w->t0 = rlk_obs_now_ns();
    w->kind = kind;
    w->watch = rlk_metrics_find(&c->obs.m, name);
    gauge_add(&c->obs.m.kind[kind].waiters, 1);
    if (w->watch != NULL) {
        gauge_add(&w->watch->kind[kind].waiters, 1);
    }
    if (atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL) {
        rlock_event ev = {.type = RLOCK_EV_WAIT_BEGIN, .kind = kind, .name = name, .owner = owner};
        emit(c, &ev);
    }
#endif
}

#ifndef RLOCK_NO_METRICS
/* The figures of one acquire's end in f (the client's or a watched name's). */
static void acquire_figs(rlk_kind_figs *f, int rc, int64_t waited, int hold_count)
{
    gauge_add(&f->waiters, -1);
    relaxed_add(&f->acquire[result_index(rc)], 1);
    rlk_hist_observe(&f->wait, waited);
    if (rc == RLOCK_OK && hold_count == 1) {
        gauge_add(&f->holds, 1);
    }
}

#endif

int rlk_obs_acquire_end(rlock_client *c, rlk_obs_wait *w, const char *name, const char *owner,
                        int rc, uint64_t token, int hold_count)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)w, (void)name, (void)owner, (void)token, (void)hold_count;
#else
    int64_t waited = rlk_obs_now_ns() - w->t0;
    acquire_figs(&c->obs.m.kind[w->kind], rc, waited, hold_count);
    if (w->watch != NULL) {
        acquire_figs(&w->watch->kind[w->kind], rc, waited, hold_count);
    }
    if (atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL) {
        rlock_event ev = {.type = rc == RLOCK_OK ? RLOCK_EV_ACQUIRED : RLOCK_EV_WAIT_FAILED,
                          .kind = w->kind,
                          .name = name,
                          .owner = owner,
                          .result = rc,
                          .wait_ns = waited,
                          .token = rc == RLOCK_OK ? token : 0,
                          .hold_count = rc == RLOCK_OK ? hold_count : 0};
        emit(c, &ev);
    }
#endif
    return rc;
}

#ifndef RLOCK_NO_METRICS
/* A hold's end (released or lost): its figures in the client's and the watched name's sets. */
static int64_t hold_end(rlock_client *c, int kind, const char *name, int64_t acquired_ns, int lost)
{
    int64_t held = acquired_ns != 0 ? rlk_obs_now_ns() - acquired_ns : 0;
    rlk_kind_figs *f[2] = {&c->obs.m.kind[kind], NULL};
    rlk_watch *wt = rlk_metrics_find(&c->obs.m, name);
    if (wt != NULL) {
        f[1] = &wt->kind[kind];
    }
    for (int i = 0; i < 2 && f[i] != NULL; i++) {
        gauge_add(&f[i]->holds, -1);
        if (lost) {
            relaxed_add(&f[i]->lost, 1);
        } else if (acquired_ns != 0) {
            rlk_hist_observe(&f[i]->hold, held);
        }
    }
    return held;
}

static void hold_event(rlock_client *c, rlock_event_type type, int kind, const char *name,
                       const char *owner, int64_t held, uint64_t token)
{
    if (atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL) {
        rlock_event ev = {.type = type,
                          .kind = kind,
                          .name = name,
                          .owner = owner,
                          .result = type == RLOCK_EV_LOST ? RLOCK_ELOST : RLOCK_OK,
                          .hold_ns = held,
                          .token = token};
        emit(c, &ev);
    }
}

#endif

void rlk_obs_release(rlock_client *c, int kind, const char *name, const char *owner,
                     int64_t acquired_ns, uint64_t token)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)kind, (void)name, (void)owner, (void)acquired_ns, (void)token;
#else
    int64_t held = hold_end(c, kind, name, acquired_ns, 0);
    hold_event(c, RLOCK_EV_RELEASED, kind, name, owner, held, token);
#endif
}

void rlk_obs_lost(rlock_client *c, int kind, const char *name, const char *owner,
                  int64_t acquired_ns, uint64_t token)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)kind, (void)name, (void)owner, (void)acquired_ns, (void)token;
#else
    int64_t held = hold_end(c, kind, name, acquired_ns, 1);
    hold_event(c, RLOCK_EV_LOST, kind, name, owner, held, token);
#endif
}

void rlk_obs_holds_add(rlock_client *c, int kind, const char *name, int64_t n)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)kind, (void)name, (void)n;
#else
    if (n == 0) {
        return;
    }
    gauge_add(&c->obs.m.kind[kind].holds, n);
    rlk_watch *wt = rlk_metrics_find(&c->obs.m, name);
    if (wt != NULL) {
        gauge_add(&wt->kind[kind].holds, n);
    }
#endif
}

void rlk_obs_forget(rlock_client *c, int kind, const char *name)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)kind, (void)name;
#else
    gauge_add(&c->obs.m.kind[kind].holds, -1);
    rlk_watch *wt = rlk_metrics_find(&c->obs.m, name);
    if (wt != NULL) {
        gauge_add(&wt->kind[kind].holds, -1);
    }
#endif
}

void rlk_obs_count(rlock_client *c, rlk_counter which)
{
    rlk_obs_add(c, which, 1);
}

void rlk_obs_add(rlock_client *c, rlk_counter which, uint64_t n)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)which, (void)n;
#else
    relaxed_add(&c->obs.m.counter[which], n);
#endif
}

void rlk_obs_failover(rlock_client *c, const char *host, int port)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)host, (void)port;
#else
    relaxed_add(&c->obs.m.counter[RLK_CNT_FAILOVERS], 1);
    if (atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL) {
        char detail[RLK_HOST_MAX + 16];
        snprintf(detail, sizeof(detail), "%s:%d", host != NULL ? host : "", port);
        rlock_event ev = {.type = RLOCK_EV_FAILOVER, .kind = -1, .detail = detail};
        emit(c, &ev);
    }
#endif
}

void rlk_obs_replica_sync_failed(rlock_client *c, int kind, const char *name, const char *owner,
                                 int result)
{
#ifdef RLOCK_NO_METRICS
    (void)c, (void)kind, (void)name, (void)owner, (void)result;
#else
    relaxed_add(&c->obs.m.counter[RLK_CNT_REPLICA_SYNC_FAILURES], 1);
    if (atomic_load_explicit(&c->obs.hook, memory_order_relaxed) != NULL) {
        rlock_event ev = {.type = RLOCK_EV_REPLICA_SYNC_FAILED,
                          .kind = kind,
                          .name = name,
                          .owner = owner,
                          .result = result};
        emit(c, &ev);
    }
#endif
}

/* ---- public calls ------------------------------------------------------------------------ */

RLOCK_EXPORT void rlock_client_on_event(rlock_client *client,
                                        void (*fn)(const rlock_event *ev, void *user_data),
                                        void *user_data)
{
    if (client == NULL) {
        rlk_err(RLOCK_EINVAL, "rlock_client_on_event: client is NULL");
        return;
    }
    rlk_hook *h = NULL;
    if (fn != NULL) {
        h = malloc(sizeof(*h));
        if (h == NULL) {
            rlk_err(RLOCK_ENOMEM, "rlock_client_on_event: cannot allocate the hook");
            return;
        }
        h->fn = fn;
        h->user_data = user_data;
        pthread_mutex_lock(&client->obs.m.watch_mu);
        h->older = client->obs.all;
        client->obs.all = h;
        pthread_mutex_unlock(&client->obs.m.watch_mu);
    }
    atomic_store_explicit(&client->obs.hook, h, memory_order_release);
}

RLOCK_EXPORT int rlock_metrics_text(rlock_client *client, char **out)
{
    if (out == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_metrics_text: out is NULL");
    }
    *out = NULL;
    if (client == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_metrics_text: client is NULL");
    }
    return rlk_metrics_render(&client->obs.m, out);
}

RLOCK_EXPORT void rlock_metrics_free(char *text)
{
    free(text);
}

RLOCK_EXPORT int rlock_metrics_watch(rlock_client *client, const char *name)
{
    if (client == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_metrics_watch: client is NULL");
    }
    int r = rlk_check_name(name, "watched");
    if (r != RLOCK_OK) {
        return r;
    }
    r = rlk_client_check(client);
    return r != RLOCK_OK ? r : rlk_metrics_watch(&client->obs.m, name);
}
