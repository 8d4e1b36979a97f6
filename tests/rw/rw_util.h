/*
 * Helpers shared by the read-write lock tests: a persistent worker thread (so a hold can belong
 * to "another thread" across several steps), clients with chosen options, and small Redis
 * queries through the harness' admin connection.
 */
#ifndef RLOCK_TESTS_RW_UTIL_H
#define RLOCK_TESTS_RW_UTIL_H

#include <pthread.h>
#include <stdint.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

enum { RW_OP_TRY = 1, RW_OP_UNLOCK, RW_OP_HELD, RW_OP_COUNT, RW_OP_QUIT };

/* A thread that runs one rlock call at a time on request; its holds persist between calls. */
typedef struct rw_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending; /* 1 while a job waits to be picked up or runs */
    int op;
    rlock *lock;
    int64_t wait_ms, lease_ms;
    int rc;
} rw_worker;

void rw_worker_start(rw_worker *w);
/* Runs op on the worker and waits for its result. */
int rw_worker_do(rw_worker *w, int op, rlock *l, int64_t wait_ms, int64_t lease_ms);
/* Starts op without waiting; rw_worker_result() collects it. */
void rw_worker_post(rw_worker *w, int op, rlock *l, int64_t wait_ms, int64_t lease_ms);
int rw_worker_result(rw_worker *w);
void rw_worker_stop(rw_worker *w);

/* TC_FIXTURE tunes: the pool of 32 that every rw test client has (rw_pool), and that with the
 * liveness tests' 1500 ms watchdog and 1000 ms waiter timeout (rw_pool_fast_liveness). */
void rw_pool(rlock_options *o);
void rw_pool_fast_liveness(rlock_options *o);

/* A client on srv; watchdog_ms/waiter_ms <= 0 keep the defaults. NULL on failure. */
rlock_client *rw_client(rh_server *srv, int64_t watchdog_ms, int reader_preferring,
                        int64_t waiter_ms);
/* Same from a URL (for child processes). */
rlock_client *rw_client_url(const char *url, int64_t watchdog_ms, int reader_preferring,
                            int64_t waiter_ms);

long long rw_redis_int(rh_server *srv, const char *cmd, const char *key);
long long rw_pttl(rh_server *srv, const char *key);
long long rw_exists(rh_server *srv, const char *key);
/* HGET key field as an allocated string (NULL if absent). */
char *rw_hget(rh_server *srv, const char *key, const char *field);

#endif
