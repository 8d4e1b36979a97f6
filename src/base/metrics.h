/*
 * The client's figures: counters, gauges and histograms by kind, the per-name figures of watched
 * names, and their OpenMetrics text. They are the sink that consumes every observation
 * (observe.c); nothing else writes them. Every update is a relaxed atomic: no lock, no allocation.
 */
#ifndef RLK_METRICS_H
#define RLK_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rlock.h"

/* The kinds of the metric labels, in the order of rlock_metric_kind (rlock.h). */
#define RLK_MK_COUNT 9
/* Results of rlock_acquire_total: ok, timeout, canceled, error. */
#define RLK_RES_COUNT 4
/* Finite histogram buckets, 100 us .. 60 s; one more counts what lies above. */
#define RLK_HIST_BUCKETS 18
/* Most names one client watches (rlock_metrics_watch()). */
#define RLK_WATCH_MAX 64

/* The plain counters the layers raise by enum (rlk_obs_count()). */
typedef enum rlk_counter {
    RLK_CNT_RENEWALS_OK = 0,
    RLK_CNT_RENEWALS_FAILED,
    RLK_CNT_REPLICA_SYNC_FAILURES,
    RLK_CNT_RECONNECTS,
    RLK_CNT_FAILOVERS,
    RLK_CNT_REDIS_COMMANDS,
    RLK_CNT_PUBSUB_MESSAGES,
    RLK_CNT_COUNT
} rlk_counter;

/* A histogram: per-bucket counts (not cumulative; the text adds them up) and the sum in ns. */
typedef struct rlk_hist {
    atomic_ullong bucket[RLK_HIST_BUCKETS + 1];
    atomic_ullong sum_ns;
} rlk_hist;

/* One kind's figures (per client, and per watched name). */
typedef struct rlk_kind_figs {
    atomic_ullong acquire[RLK_RES_COUNT];
    atomic_llong holds;
    atomic_llong waiters;
    atomic_ullong lost;
    rlk_hist wait;
    rlk_hist hold;
} rlk_kind_figs;

/* A watched name: set once before it is published, read without a lock afterwards. */
typedef struct rlk_watch {
    char *name;
    size_t len;
    rlk_kind_figs kind[RLK_MK_COUNT];
} rlk_watch;

typedef struct rlk_metrics {
    rlk_kind_figs kind[RLK_MK_COUNT];
    atomic_ullong counter[RLK_CNT_COUNT];
    /* Watched names: watch[0 .. nwatch-1] are published (release store of nwatch) and never
     * change until the client is freed; watch_mu orders the writers only. */
    rlk_watch *watch[RLK_WATCH_MAX];
    atomic_int nwatch;
    pthread_mutex_t watch_mu;
} rlk_metrics;

void rlk_metrics_init(rlk_metrics *m);
void rlk_metrics_destroy(rlk_metrics *m);

/* Adds one observation of ns nanoseconds (negative counts as 0). */
void rlk_hist_observe(rlk_hist *h, int64_t ns);

/* The watched name's figures, or NULL when the name is not watched (one load when none is). */
rlk_watch *rlk_metrics_find(rlk_metrics *m, const char *name);

/* Watches name (idempotent): RLOCK_OK, RLOCK_EINVAL (RLK_WATCH_MAX names already), or
 * RLOCK_ENOMEM, with a message. */
int rlk_metrics_watch(rlk_metrics *m, const char *name);

/* The OpenMetrics text of m, allocated (free()); RLOCK_OK or RLOCK_ENOMEM with a message. */
int rlk_metrics_render(rlk_metrics *m, char **out);

#endif
