/*
 * rlock_bench's loop-client scenarios (bench_loop_*.c): a libuv loop with a tick, loop clients on
 * it, and the PING round trip. These files see the public headers only (as a user's code does),
 * since the library's private include path has a semaphore.h that would hide the system's from
 * uv.h.
 */
#ifndef RLOCK_BENCH_LOOP_H
#define RLOCK_BENCH_LOOP_H

#include <uv.h>

#include "bench.h"
#include "rlock_async.h"

/* A libuv loop with a 5 ms repeating tick, so that a turn of the loop never sleeps longer. */
typedef struct bench_uv {
    uv_loop_t uv;
    uv_timer_t tick;
} bench_uv;

void bench_uv_init(bench_uv *l);
/* Stops the tick, runs the loop until every handle closed (free the clients first), closes it. */
void bench_uv_close(bench_uv *l);
/* Runs the loop until *count >= want or ms passed; 1 when the count was reached. */
int bench_uv_run_until(bench_uv *l, const int *count, int want, int64_t ms);
/* A loop client of server idx on l (rlock/libuv.h), or death. */
rlock_client *bench_uv_client(bench_uv *l, int idx);
/* Frees a loop client and lets the loop release its handles. */
void bench_uv_client_free(bench_uv *l, rlock_client *c);
/* PING round trip p50 in us on a raw connection of server 0: n PINGs, 1 ms apart. */
double bench_loop_rtt_us(int n);

#endif
