/*
 * A client across fork(): pthread_atfork handlers hold the client's mutexes across fork() and
 * raise the fork generation in the child; rlk_client_enter() at every entry point then gives a
 * child's client a new UUID, abandons the inherited connections unwritten and starts a new
 * subscriber and watchdog. docs/internals/fork.md explains the design and what is not covered.
 */
#include <pthread.h>
#include <uuid/uuid.h>

#include "client.h"
#include "client_fork.h"
#include "error.h"
#include "cluster.h"
#include "pool.h"
#include "pubsub.h"
#include "pubsub_conn.h"
#include "watchdog.h"

static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static rlock_client *fork_clients; /* live clients, under fork_mu */

void rlk_fork_lock(void)
{
    pthread_mutex_lock(&fork_mu);
}

void rlk_fork_unlock(void)
{
    pthread_mutex_unlock(&fork_mu);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&fork_mu);
    for (rlock_client *c = fork_clients; c != NULL; c = c->fork_next) {
        if (c->pubsub != NULL) {
            rlk_pubsub_fork_lock(c->pubsub);
        }
        if (c->pool != NULL) {
            rlk_pool_fork_lock(c->pool);
        }
        if (c->cluster != NULL) {
            rlk_cluster_fork_lock(c->cluster);
        }
        if (c->watchdog != NULL) {
            rlk_watchdog_fork_lock(c->watchdog);
        }
    }
}

static void fork_release(void)
{
    for (rlock_client *c = fork_clients; c != NULL; c = c->fork_next) {
        if (c->watchdog != NULL) {
            rlk_watchdog_fork_unlock(c->watchdog);
        }
        if (c->cluster != NULL) {
            rlk_cluster_fork_unlock(c->cluster);
        }
        if (c->pool != NULL) {
            rlk_pool_fork_unlock(c->pool);
        }
        if (c->pubsub != NULL) {
            rlk_pubsub_fork_unlock(c->pubsub);
        }
    }
    pthread_mutex_unlock(&fork_mu);
}

/* The child is single-threaded here: nothing can read the generation while it changes. */
static void fork_child(void)
{
    atomic_fetch_add_explicit(&rlk_fork_generation, 1, memory_order_relaxed);
    fork_release();
}

static void fork_install(void)
{
    (void)pthread_atfork(fork_prepare, fork_release, fork_child);
}

void rlk_fork_register(rlock_client *c)
{
    (void)pthread_once(&fork_once, fork_install);
    pthread_mutex_lock(&fork_mu);
    c->fork_prev = NULL;
    c->fork_next = fork_clients;
    if (fork_clients != NULL) {
        fork_clients->fork_prev = c;
    }
    fork_clients = c;
    pthread_mutex_unlock(&fork_mu);
}

void rlk_fork_unregister(rlock_client *c)
{
    pthread_mutex_lock(&fork_mu);
    if (c->fork_prev != NULL || fork_clients == c) {
        *(c->fork_prev != NULL ? &c->fork_prev->fork_next : &fork_clients) = c->fork_next;
        if (c->fork_next != NULL) {
            c->fork_next->fork_prev = c->fork_prev;
        }
        c->fork_prev = c->fork_next = NULL;
    }
    pthread_mutex_unlock(&fork_mu);
}

/* Drops what c inherited (fork_mu held, c stale): a new identity first, so that even a client
 * whose refresh fails is never taken for its parent. */
static void fork_abandon(rlock_client *c)
{
    uuid_t id;
    uuid_generate(id);
    uuid_unparse_lower(id, c->uuid);
    rlk_watchdog_abandon(c->watchdog);
    c->watchdog = NULL;
    rlk_pubsub_abandon(c->pubsub);
    c->pubsub = NULL;
    rlk_pool_abandon(c->pool);
    c->pool = NULL;
    rlk_cluster_abandon_pools(c->cluster);
}

void rlk_client_abandon_inherited(rlock_client *c)
{
    pthread_mutex_lock(&fork_mu);
    if (rlk_fork_stale(&c->gen)) {
        fork_abandon(c);
    }
    pthread_mutex_unlock(&fork_mu);
}

/* Gives c, inherited from the parent, its own identity, connections and threads. On failure c
 * stays stale with nothing of its own started, so the next call tries again. */
static int fork_refresh(rlock_client *c)
{
    pthread_mutex_lock(&fork_mu);
    int r = RLOCK_OK;
    int refreshed = 0;
    if (rlk_fork_stale(&c->gen)) {
        fork_abandon(c);
        r = rlk_pool_new(c, &c->pool);
        r = r ? r : rlk_pubsub_new(c, &c->pubsub);
        r = r ? r : rlk_watchdog_new(c, &c->watchdog);
        if (r != RLOCK_OK) {
            rlk_pubsub_free(c->pubsub);
            c->pubsub = NULL;
            rlk_pool_free(c->pool);
            c->pool = NULL;
        } else {
            atomic_store_explicit(&c->gen, rlk_fork_gen(), memory_order_release);
            refreshed = 1;
        }
    }
    pthread_mutex_unlock(&fork_mu);
    if (refreshed) {
        /* Logged without fork_mu: the user's log_fn may do anything, fork() included. */
        rlk_log(c, RLOCK_LOG_INFO, "fork() detected: this process' client id is now %s", c->uuid);
    }
    return r;
}

int rlk_client_enter(rlock_client *c)
{
    if (c->loop != NULL && rlk_fork_stale(&c->gen)) {
        /* Its loop is the parent's, and a refresh would start a threaded client's threads. */
        return rlk_err(RLOCK_ECLOSED, "a loop client is not usable in a child of fork()");
    }
    if (!atomic_load(&c->closed) && rlk_fork_stale(&c->gen)) {
        int r = fork_refresh(c);
        if (r != RLOCK_OK) {
            return r;
        }
    }
    return rlk_client_check(c);
}
