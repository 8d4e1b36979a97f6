/*
 * What every layer may ask of the client it serves: whether it was freed, and the user's log
 * function. Kept apart from client.c, which creates the pool, the subscriber and the watchdog,
 * so that those layers depend on this small file and not on their creator (no cycle between
 * client.c and the layers below it; see docs/architecture.md).
 */
#include <stdarg.h>
#include <stdio.h>

#include "client.h"

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
