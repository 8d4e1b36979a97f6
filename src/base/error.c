/*
 * The error table and the thread-local last-error detail. Codes live in rlock.h and are only
 * ever appended; the table below must keep one entry per code in order.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "util.h"

#define RLK_ERRMSG_MAX 512

static const char *const error_messages[] = {
    "success",                                     /* RLOCK_OK */
    "timed out waiting for the lock",              /* RLOCK_ETIMEDOUT */
    "lock is not held by the calling thread",      /* RLOCK_ENOTOWNER */
    "lock lease ran out while it was held",        /* RLOCK_ELOST */
    "invalid argument",                            /* RLOCK_EINVAL */
    "out of memory",                               /* RLOCK_ENOMEM */
    "connection to Redis failed or timed out",     /* RLOCK_ECONN */
    "Redis returned an error",                     /* RLOCK_EREDIS */
    "client is closed",                            /* RLOCK_ECLOSED */
    "operation would deadlock",                    /* RLOCK_EDEADLK */
    "operation not supported by this lock type",   /* RLOCK_ENOTSUP */
    "unexpected reply from Redis",                 /* RLOCK_EPROTO */
    "authentication or database selection failed", /* RLOCK_EAUTH */
    "TLS handshake or certificate check failed",   /* RLOCK_ETLS */
    "replicas did not acknowledge in time",        /* RLOCK_EREPLICA */
    "the wait was cancelled",                      /* RLOCK_ECANCELED */
};

/* The detail text is per thread, because the client and handles are shared across threads and
 * a shared buffer would be overwritten by another thread's failure before it is read. */
static _Thread_local char errmsg[RLK_ERRMSG_MAX];

RLOCK_EXPORT const char *rlock_strerror(int code)
{
    size_t idx = (size_t)(-(long)code);
    if (code > 0 || idx >= sizeof(error_messages) / sizeof(error_messages[0])) {
        return "unknown error code";
    }
    return error_messages[idx];
}

RLOCK_EXPORT const char *rlock_last_error(void)
{
    return errmsg;
}

RLOCK_EXPORT const char *rlock_version_string(void)
{
#define RLK_STR2(x) #x
#define RLK_STR(x)  RLK_STR2(x)
    return RLK_STR(RLOCK_VERSION_MAJOR) "." RLK_STR(RLOCK_VERSION_MINOR) "." RLK_STR(
        RLOCK_VERSION_PATCH);
}

RLOCK_EXPORT unsigned long rlock_version(void)
{
    return RLOCK_VERSION_HEX;
}

int rlk_err(int code, const char *fmt, ...)
{
    int n = snprintf(errmsg, sizeof(errmsg), "%s: ", rlock_strerror(code));
    if (n < 0 || (size_t)n >= sizeof(errmsg)) {
        return code;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg + n, sizeof(errmsg) - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

void rlk_err_clear(void)
{
    errmsg[0] = '\0';
}

void rlk_err_restore(const char *saved)
{
    snprintf(errmsg, sizeof(errmsg), "%s", saved);
}
