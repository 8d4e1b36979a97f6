/* Helpers shared by the read-write lock tests (see rw_util.h). */
#include "rw_util.h"
#include "tc_redis.h"

#include <hiredis.h>
#include <stdlib.h>

static void *rw_worker_main(void *arg)
{
    rw_worker *w = arg;
    int quit = 0;

    pthread_mutex_lock(&w->mu);
    while (!quit) {
        while (w->pending != 1) {
            pthread_cond_wait(&w->cv, &w->mu);
        }
        int op = w->op;
        rlock *l = w->lock;
        int64_t wait_ms = w->wait_ms;
        int64_t lease_ms = w->lease_ms;
        int rc = 0;

        pthread_mutex_unlock(&w->mu);
        switch (op) {
        case RW_OP_TRY:
            rc = rlock_try_lock(l, wait_ms, lease_ms);
            break;
        case RW_OP_UNLOCK:
            rc = rlock_unlock(l);
            break;
        case RW_OP_HELD:
            rc = rlock_is_held(l);
            break;
        case RW_OP_COUNT:
            rc = rlock_hold_count(l);
            break;
        default:
            quit = 1;
            break;
        }
        pthread_mutex_lock(&w->mu);
        w->rc = rc;
        w->pending = 2;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void rw_worker_start(rw_worker *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->pending = 0;
    pthread_create(&w->thread, NULL, rw_worker_main, w);
}

void rw_worker_post(rw_worker *w, int op, rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    pthread_mutex_lock(&w->mu);
    w->op = op;
    w->lock = l;
    w->wait_ms = wait_ms;
    w->lease_ms = lease_ms;
    w->pending = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int rw_worker_result(rw_worker *w)
{
    int rc;

    pthread_mutex_lock(&w->mu);
    while (w->pending != 2) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    w->pending = 0;
    rc = w->rc;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int rw_worker_do(rw_worker *w, int op, rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    rw_worker_post(w, op, l, wait_ms, lease_ms);
    return rw_worker_result(w);
}

void rw_worker_stop(rw_worker *w)
{
    rw_worker_do(w, RW_OP_QUIT, NULL, 0, 0);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

void rw_pool(rlock_options *o)
{
    o->pool_size = 32;
}

void rw_pool_fast_liveness(rlock_options *o)
{
    rw_pool(o);
    o->watchdog_timeout_ms = 1500;
    o->waiter_timeout_ms = 1000;
}

rlock_client *rw_client_url(const char *url, int64_t watchdog_ms, int reader_preferring,
                            int64_t waiter_ms)
{
    rlock_options o;

    tc_options_url(&o, url);
    rw_pool(&o);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    if (waiter_ms > 0) {
        o.waiter_timeout_ms = waiter_ms;
    }
    o.rw_reader_preferring = reader_preferring;
    return tc_client_try(&o);
}

rlock_client *rw_client(rh_server *srv, int64_t watchdog_ms, int reader_preferring,
                        int64_t waiter_ms)
{
    return rw_client_url(rh_url(srv), watchdog_ms, reader_preferring, waiter_ms);
}

long long rw_redis_int(rh_server *srv, const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key, NULL};

    return rh_cmd_int(srv, argv);
}

long long rw_pttl(rh_server *srv, const char *key)
{
    redisReply *r;
    long long v = -100;
    const char *argv[] = {"PTTL", key, NULL};

    r = rh_cmd(srv, argv);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return v;
}

long long rw_exists(rh_server *srv, const char *key)
{
    return rw_redis_int(srv, "EXISTS", key);
}

char *rw_hget(rh_server *srv, const char *key, const char *field)
{
    const char *argv[] = {"HGET", key, field, NULL};

    return rh_cmd_str(srv, argv);
}
