/*
 * Scenario loop_waits: one loop thread keeps 10,000 concurrent waits (10 owners on each of
 * 1,000 names, held by a threaded client of the same process), then a helper thread releases
 * the names and every wait is served: acquired, then released, so the next owner of the name
 * gets it. Rows: the client's heap per pending wait (mallinfo2() in use with every wait asleep,
 * minus before the first was queued, over 10,000), against the 512 bytes, and the time
 * from the first release to the last wait's release.
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_loop.h"

#define W_NAMES  1000
#define W_OWNERS 10
#define W_WAITS  (W_NAMES * W_OWNERS)

typedef struct w_state {
    bench_uv loop;
    rlock_client *lc, *tc;            /* the loop client; the holders' threaded client */
    rlock *ll[W_NAMES], *tl[W_NAMES]; /* handles of each name on each */
    rlock_owner *lo[W_OWNERS], *to;   /* the waiting owners; the holder */
    int served, errors;
} w_state;

typedef struct w_wait {
    w_state *s;
    int name, owner;
} w_wait;

static void w_unlocked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    w_wait *w = arg;
    w->s->errors += rc != RLOCK_OK;
    w->s->served++;
}

static void w_granted(rlock *lock, int rc, void *arg)
{
    w_wait *w = arg;
    if (rc != RLOCK_OK || rlock_unlock_async(lock, w->s->lo[w->owner], w_unlocked, w) != RLOCK_OK) {
        w->s->errors++;
        w->s->served++;
    }
}

static void w_open(w_state *s)
{
    bench_uv_init(&s->loop);
    s->lc = bench_uv_client(&s->loop, 0);
    s->tc = bench_client(0, 0, 0);
    if (rlock_owner_new(s->tc, &s->to) != RLOCK_OK) {
        bench_die("rlock_owner_new: %s", rlock_last_error());
    }
    for (int i = 0; i < W_OWNERS; i++) {
        if (rlock_owner_new(s->lc, &s->lo[i]) != RLOCK_OK) {
            bench_die("rlock_owner_new: %s", rlock_last_error());
        }
    }
    for (int i = 0; i < W_NAMES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bench_lw:%d", i);
        s->ll[i] = rlock_open(s->lc, RLOCK_REENTRANT, name);
        s->tl[i] = rlock_open(s->tc, RLOCK_REENTRANT, name);
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.owner = s->to;
        a.wait_ms = 0;
        a.lease_ms = 120000;
        if (s->ll[i] == NULL || s->tl[i] == NULL || rlock_lock_ex(s->tl[i], &a) != RLOCK_OK) {
            bench_die("loop_waits: holding %s: %s", name, rlock_last_error());
        }
    }
}

/* Connects both of the loop client's connections before the heap is measured: a short wait on
 * a held name (it times out) dials the data and the pub/sub connection. */
static void w_warm(w_state *s)
{
    static w_wait warm;
    warm = (w_wait){.s = s, .name = 0, .owner = 0};
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = s->lo[0];
    a.wait_ms = 100;
    a.lease_ms = 30000;
    int before = s->served;
    if (rlock_lock_async(s->ll[0], &a, w_granted, &warm) != RLOCK_OK ||
        !bench_uv_run_until(&s->loop, &s->served, before + 1, 5000)) {
        bench_die("loop_waits: warm-up wait: %s", rlock_last_error());
    }
    s->errors = 0;
    s->served = 0;
}

/* Runs the loop until every wait sleeps: Redis counts a subscriber on each of the 1,000 names'
 * wake channels of the loop client (its waiters listen on Redisson's channel through a pattern,
 * which PUBSUB CHANNELS does not list) and no attempt arrived during the last 100 ms. */
static void w_settle(w_state *s, redisContext *ctl)
{
    uint64_t last = 0;
    int64_t end = bench_now_ns() + 30 * (int64_t)1000000000;
    for (int quiet = 0; quiet < 2;) {
        int never = 0;
        (void)bench_uv_run_until(&s->loop, &never, 1, 50);
        bench_cmdstats st;
        bench_cmdstats_get(ctl, &st);
        uint64_t calls = bench_cmdstats_calls(&st, "evalsha");
        redisReply *r = bench_cmd(ctl, "PUBSUB CHANNELS rlock_lock_wake:{bench_lw:*}:*");
        size_t chans = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
        freeReplyObject(r);
        quiet = chans == W_NAMES && calls == last ? quiet + 1 : 0;
        last = calls;
        if (bench_now_ns() > end) {
            bench_die("loop_waits: the waits did not settle (%zu channels)", chans);
        }
    }
}

typedef struct w_rel {
    w_state *s;
    int errors;
} w_rel;

static void *w_release(void *arg)
{
    w_rel *r = arg;
    for (int i = 0; i < W_NAMES; i++) {
        r->errors += rlock_unlock_ex(r->s->tl[i], r->s->to) != RLOCK_OK;
    }
    return NULL;
}

static void w_close(w_state *s)
{
    for (int i = 0; i < W_NAMES; i++) {
        rlock_free(s->ll[i]);
        rlock_free(s->tl[i]);
    }
    for (int i = 0; i < W_OWNERS; i++) {
        rlock_owner_free(s->lo[i]);
    }
    rlock_owner_free(s->to);
    bench_uv_client_free(&s->loop, s->lc);
    bench_uv_close(&s->loop);
    rlock_client_free(s->tc);
}

static void w_report(double per_wait, double serve_ms, double rtt)
{
    /* NAN: the allocator does not answer mallinfo2() (a sanitizer's, say). */
    bench_row("loop_waits", "heap per pending wait (B)", NAN, per_wait, "<= 512",
              isnan(per_wait) ? -1 : per_wait <= 512);
    bench_row("loop_waits", "serve 10,000 waits (ms)", NAN, serve_ms, NULL, -1);
    bench_row("loop_waits", "PING RTT p50 (us)", rtt, rtt, NULL, -1);
    bench_json j;
    bench_json_begin(&j, "loop_waits");
    BENCH_JSON_NUMS(&j, {"waits", W_WAITS}, {"names", W_NAMES}, {"bytes_per_wait", per_wait},
                    {"serve_ms", serve_ms}, {"rtt_p50_us", rtt});
    bench_json_end(&j);
}

int bench_loop_waits(void)
{
    static w_state s;
    static w_wait waits[W_WAITS];
    memset(&s, 0, sizeof(s));
    w_open(&s);
    w_warm(&s);
    redisContext *ctl = bench_raw(0);
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.lease_ms = 30000;
    size_t before = mallinfo2().uordblks;
    for (int i = 0; i < W_WAITS; i++) {
        waits[i] = (w_wait){.s = &s, .name = i / W_OWNERS, .owner = i % W_OWNERS};
        a.owner = s.lo[i % W_OWNERS];
        if (rlock_lock_async(s.ll[i / W_OWNERS], &a, w_granted, &waits[i]) != RLOCK_OK) {
            bench_die("loop_waits: rlock_lock_async: %s", rlock_last_error());
        }
    }
    w_settle(&s, ctl);
    size_t after = mallinfo2().uordblks;
    double per_wait = after > before ? (double)(after - before) / W_WAITS : NAN;
    double rtt = bench_loop_rtt_us(200);
    w_rel rel = {.s = &s};
    pthread_t th;
    int64_t t0 = bench_now_ns();
    if (pthread_create(&th, NULL, w_release, &rel) != 0) {
        bench_die("pthread_create failed");
    }
    int all = bench_uv_run_until(&s.loop, &s.served, W_WAITS, 60000);
    double serve_ms = (double)(bench_now_ns() - t0) / 1e6;
    pthread_join(th, NULL);
    if (!all || s.errors != 0 || rel.errors != 0) {
        bench_die("loop_waits: %d of %d served, %d errors, %d release errors", s.served, W_WAITS,
                  s.errors, rel.errors);
    }
    redisFree(ctl);
    w_close(&s);
    w_report(per_wait, serve_ms, rtt);
    return 0;
}
