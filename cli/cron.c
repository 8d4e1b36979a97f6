/*
 * rlock run's cron semantics, on the public API only: --once-per's marker (a lock hash with a
 * TTL, never released, beside the lock in its hash slot) and --hold-at-least's extension of a
 * hold taken with a short explicit lease.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The marker's name: "{NAME}:rlock_once", or "NAME:rlock_once" when NAME holds a hash tag of its
 * own, so that it hashes to NAME's slot either way and falls under the "{app:*" pattern of a
 * least-privilege ACL (README) as the lock's other derived keys do. malloc()ed; NULL if no
 * memory. */
static char *cron_marker_name(const char *name)
{
    const char *open = strchr(name, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;
    int tagged = close != NULL && close > open + 1;
    size_t n = strlen(name) + sizeof("{}:rlock_once");
    char *m = malloc(n);
    if (m != NULL) {
        snprintf(m, n, tagged ? "%s:rlock_once" : "{%s}:rlock_once", name);
    }
    return m;
}

static rlock *cron_marker_open(rlock_client *c, const char *name)
{
    char *m = cron_marker_name(name);
    rlock *l = m != NULL ? rlock_open(c, RLOCK_REENTRANT, m) : NULL;
    free(m);
    return l;
}

int cli_once_marked(rlock_client *c, const char *name)
{
    rlock *m = cron_marker_open(c, name);
    if (m == NULL) {
        return RLOCK_ENOMEM;
    }
    int r = rlock_is_locked(m);
    rlock_free(m);
    return r;
}

int cli_once_mark(rlock_client *c, const char *name, int64_t ttl_ms)
{
    rlock *m = cron_marker_open(c, name);
    if (m == NULL) {
        return RLOCK_ENOMEM;
    }
    /* Taken once and never released: its lease is the marker's TTL. Busy means another run's
     * marker is there already (a shorter --once-per elsewhere), which says the same. */
    int r = rlock_try_lock(m, 0, ttl_ms);
    rlock_free(m);
    return r == RLOCK_ETIMEDOUT ? RLOCK_OK : r;
}

int cli_hold_extend(rlock *l, int64_t lease_ms)
{
    /* A hold the calling thread no longer has on Redis was lost: re-taking it would count a
     * hold Redis does not have. */
    int n = rlock_hold_count(l);
    if (n <= 0) {
        return n < 0 ? n : RLOCK_ELOST;
    }
    /* A re-entry with a longer lease (or under the watchdog) extends the hold, and the partial
     * release keeps that lease: one hold remains, renewed from now on. */
    int r = rlock_try_lock(l, 0, lease_ms);
    return r != RLOCK_OK ? r : rlock_unlock(l);
}
