/*
 * The client's context (context.h): whether it was freed, the user's log, a cluster name's
 * check, the current master, the fork generation. Apart from client.c, which creates the pool,
 * the subscriber and the watchdog, so that every layer depends on this file, not on its creator.
 */
#include <stdarg.h>
#include <stdio.h>

#include <string.h>

#include "cluster_slot.h"
#include "context.h"
#include "error.h"

/* Here rather than in client_fork.c: every layer reads it (through rlk_client_check()), and
 * client_fork.c depends on those layers. */
atomic_uint rlk_fork_generation;

int rlk_client_check(const rlock_client *c)
{
    if (atomic_load(&c->closed)) {
        return rlk_err(RLOCK_ECLOSED, "the client of this handle was freed");
    }
    if (atomic_load_explicit(&c->gen, memory_order_acquire) != rlk_fork_gen()) {
        return rlk_err(RLOCK_ECLOSED, "the client was inherited across fork() and not refreshed");
    }
    return RLOCK_OK;
}

int rlk_client_blocking(const rlock_client *c, const char *what)
{
    if (c->loop != NULL) {
        return rlk_err(RLOCK_EINVAL, "%s would block: this is a loop client (rlock_async.h)", what);
    }
    return RLOCK_OK;
}

/* Names are refused rather than given companions of rlock's own: a Redisson client derives the
 * companions by its rule, so a name it cannot use on a cluster is not one to share with it. */
int rlk_check_cluster_name(const rlock_client *c, const char *name, const char *what)
{
    if (c->cluster == NULL) {
        return RLOCK_OK;
    }
    size_t len = strlen(name);
    int shown = len > 64 ? 64 : (int)len;
    if (strcmp(what, "latch") == 0) {
        if (memchr(name, '}', len) == NULL) {
            return RLOCK_OK;
        }
        return rlk_err(RLOCK_EINVAL,
                       "a latch name on a cluster client must not hold '}': the channel "
                       "redisson_countdownlatch__channel__{name} of \"%.*s\" would hash to another "
                       "slot than the name",
                       shown, name);
    }
    int braces = memchr(name, '{', len) != NULL || memchr(name, '}', len) != NULL;
    if (!braces || rlk_cluster_has_tag(name, len)) {
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_EINVAL,
                   "a %s name on a cluster client must hold no brace or a hash tag ({tag}, not "
                   "empty): the keys Redisson's rule derives from \"%.*s\" (prefix:name) would "
                   "hash to another slot than the name",
                   what, shown, name);
}

void rlk_log(const rlock_client *c, int level, const char *fmt, ...)
{
    if (c->opts.log_fn == NULL || level > c->opts.log_level) {
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->opts.log_fn(level, msg, c->opts.user_data);
}

void rlk_client_master(const rlock_client *c, char *host, int *port)
{
    /* The mutex is the client's own, so taking it through a const client is sound. */
    pthread_mutex_t *mu = (pthread_mutex_t *)&c->master_mu;
    pthread_mutex_lock(mu);
    memcpy(host, c->master_host, RLK_HOST_MAX);
    *port = c->master_port;
    pthread_mutex_unlock(mu);
}

void rlk_client_set_master(rlock_client *c, const char *host, int port)
{
    pthread_mutex_lock(&c->master_mu);
    snprintf(c->master_host, sizeof(c->master_host), "%s", host);
    c->master_port = port;
    pthread_mutex_unlock(&c->master_mu);
    atomic_fetch_add(&c->master_gen, 1);
}
