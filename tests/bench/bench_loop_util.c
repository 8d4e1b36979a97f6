/*
 * Helpers of the loop-client scenarios (bench_loop.h): the loop, its clients, the PING RTT.
 */
#include "bench_loop.h"

#include "rlock/libuv.h"

static void bu_tick(uv_timer_t *t)
{
    (void)t;
}

void bench_uv_init(bench_uv *l)
{
    if (uv_loop_init(&l->uv) != 0 || uv_timer_init(&l->uv, &l->tick) != 0) {
        bench_die("uv_loop_init failed");
    }
    uv_timer_start(&l->tick, bu_tick, 5, 5);
}

void bench_uv_close(bench_uv *l)
{
    uv_timer_stop(&l->tick);
    uv_close((uv_handle_t *)&l->tick, NULL);
    (void)uv_run(&l->uv, UV_RUN_DEFAULT);
    if (uv_loop_close(&l->uv) != 0) {
        bench_die("uv_loop_close: handles still open");
    }
}

int bench_uv_run_until(bench_uv *l, const int *count, int want, int64_t ms)
{
    int64_t end = bench_now_ns() + ms * 1000000;
    while (*count < want && bench_now_ns() < end) {
        (void)uv_run(&l->uv, UV_RUN_ONCE);
    }
    return *count >= want;
}

rlock_client *bench_uv_client(bench_uv *l, int idx)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", g_cfg.ports[idx]);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    rlock_client *c = NULL;
    int r = rlock_libuv_client_new(&o, &l->uv, &c);
    if (r != RLOCK_OK) {
        bench_die("rlock_libuv_client_new: %s: %s", rlock_strerror(r), rlock_last_error());
    }
    return c;
}

void bench_uv_client_free(bench_uv *l, rlock_client *c)
{
    rlock_client_free(c);
    for (int i = 0; i < 4; i++) { /* libuv closes the client's handles on the next turns */
        (void)uv_run(&l->uv, UV_RUN_NOWAIT);
    }
}

double bench_loop_rtt_us(int n)
{
    redisContext *c = bench_raw(0);
    bench_samples s = {0};
    for (int i = 0; i < n; i++) {
        int64_t a = bench_now_ns();
        freeReplyObject(bench_cmd(c, "PING"));
        bench_samples_add(&s, (double)(bench_now_ns() - a) / 1000.0);
        bench_sleep_us(1000);
    }
    double p50 = bench_pct(&s, 50);
    bench_samples_free(&s);
    redisFree(c);
    return p50;
}
