/*
 * The independent mutual-exclusion checker shared by the stress tests. It knows nothing of the
 * lock: inside a critical section it sets a flag with SET NX (a failure means someone else is
 * inside: counted as a violation on Redis), bumps a counter with a non-atomic GET + SET (lost
 * updates show as a short count), and clears the flag before the caller unlocks.
 */
#ifndef RLOCK_TESTS_MX_CHECKER_H
#define RLOCK_TESTS_MX_CHECKER_H

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>

/* An integer from an integer, numeric string or nil reply; -1000000 on any other outcome. */
static inline long long mx_int(redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    long long v = -1000000;
    if (r != NULL) {
        if (r->type == REDIS_REPLY_INTEGER) {
            v = r->integer;
        } else if (r->type == REDIS_REPLY_STRING) {
            v = strtoll(r->str, NULL, 10);
        } else if (r->type == REDIS_REPLY_NIL) {
            v = 0;
        }
        freeReplyObject(r);
    }
    return v;
}

/* One critical section's checks on the given keys. Returns 0, or -1 on a Redis error of the
 * checker itself (not a violation: those are counted in the violations key). */
static inline int mx_critical_section(redisContext *ctx, const char *flag, const char *counter,
                                      const char *violations)
{
    const char *setnx[] = {"SET", flag, "1", "NX"};
    redisReply *r = redisCommandArgv(ctx, 4, setnx, NULL);
    if (r == NULL) {
        return -1;
    }
    int alone = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (!alone) {
        const char *incr[] = {"INCR", violations};
        mx_int(ctx, 2, incr);
    }
    const char *get[] = {"GET", counter};
    long long v = mx_int(ctx, 2, get);
    if (v < 0) {
        return -1;
    }
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v + 1);
    const char *set[] = {"SET", counter, buf};
    r = redisCommandArgv(ctx, 3, set, NULL);
    if (r == NULL) {
        return -1;
    }
    freeReplyObject(r);
    const char *del[] = {"DEL", flag};
    return mx_int(ctx, 2, del) < 0 ? -1 : 0;
}

#endif
