/*
 * rlock_open(): the one place that knows every single-key lock type, so that the generic layer
 * (lock.c, lock_acquire.c, lock_release.c ...) calls no lock type and the lock types depend on it,
 * not the other way round.
 */
#include <string.h>

#include "client_fork.h"
#include "error.h"
#include "lock.h"
#include "lock_fair.h"
#include "lock_reentrant.h"
#include "lock_rw.h"

RLOCK_EXPORT rlock *rlock_open(rlock_client *client, rlock_kind kind, const char *name)
{
    if (client == NULL) {
        rlk_err(RLOCK_EINVAL, "client must not be NULL");
        return NULL;
    }
    if (rlk_client_enter(client) != RLOCK_OK) {
        return NULL;
    }
    if (rlk_check_name(name, "lock") != RLOCK_OK ||
        rlk_check_cluster_name(client, name, "lock") != RLOCK_OK) {
        return NULL;
    }
    switch (kind) {
    case RLOCK_REENTRANT:
        return rlk_reentrant_open(client, name);
    case RLOCK_FAIR:
        return rlk_fair_open(client, name);
    case RLOCK_READ:
    case RLOCK_WRITE:
        return rlk_rw_open(client, kind, name);
    case RLOCK_SPIN:
        return rlk_spin_open(client, name);
    }
    rlk_err(RLOCK_EINVAL, "unknown lock kind %d", (int)kind);
    return NULL;
}
