/*
 * rlock_bench_pairs PORT NAME PAIRS: one thread's uncontended rlock_lock(l, 30000) +
 * rlock_unlock(l) pairs on redis://127.0.0.1:PORT, after 200 warm-up pairs. Prints
 * "<pairs per second> <client CPU us per pair>". Built twice: against the library (metrics on)
 * as rlock_bench_pairs, and against its objects compiled with RLOCK_NO_METRICS as
 * rlock_bench_pairs_off, so the `metrics` scenario (bench_metrics.c) runs the same code both ways.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "rlock.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int pairs(rlock *l, long n)
{
    for (long i = 0; i < n; i++) {
        if (rlock_lock(l, 30000) != RLOCK_OK || rlock_unlock(l) != RLOCK_OK) {
            fprintf(stderr, "rlock_bench_pairs: %s\n", rlock_last_error());
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT NAME PAIRS\n", argv[0]);
        return 2;
    }
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%s", argv[1]);
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    rlock_client *c = NULL;
    if (rlock_client_new(&o, &c) != RLOCK_OK) {
        fprintf(stderr, "rlock_bench_pairs: %s\n", rlock_last_error());
        return 1;
    }
    rlock *l = rlock_open(c, RLOCK_REENTRANT, argv[2]);
    long n = atol(argv[3]);
    int r = l != NULL && n > 0 ? pairs(l, 200) : -1;
    double t0 = now_s(), c0 = cpu_s();
    r = r == 0 ? pairs(l, n) : r;
    double secs = now_s() - t0, cpu = cpu_s() - c0;
    if (r == 0) {
        printf("%.1f %.3f\n", (double)n / secs, cpu * 1e6 / (double)n);
    }
    rlock_free(l);
    rlock_client_free(c);
    return r == 0 ? 0 : 1;
}
