/*
 * The server check of rlock_client_new(): rlock's scripts carry Lua script flags (`#!lua`), which
 * Redis understands from 7.0 on (Valkey from its first release, 7.2). An older server would
 * refuse every script with a compile error at the first lock; the client refuses it at creation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "client_version.h"
#include "conn.h"
#include "error.h"

/* The oldest Redis API version that runs script flags, as major * 100 + minor. */
#define VERSION_MIN 700

/* Copies the value of INFO field `name:` (up to the end of its line) into out; 0 when absent. */
static int info_field(const char *info, const char *name, char *out, size_t outlen)
{
    size_t n = strlen(name);
    for (const char *p = info; p != NULL && *p != '\0';) {
        const char *eol = strpbrk(p, "\r\n");
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        if (len > n && strncmp(p, name, n) == 0 && p[n] == ':') {
            snprintf(out, outlen, "%.*s", (int)(len - n - 1), p + n + 1);
            return 1;
        }
        p = eol != NULL ? eol + strspn(eol, "\r\n") : NULL;
    }
    return 0;
}

/* Judges one INFO server text: RLOCK_OK, or RLOCK_ENOTSUP naming the server and its version.
 * Valkey reports its own version in valkey_version and the Redis API it implements in
 * redis_version (7.2.4 for Valkey 7.2 and 8); the latter decides. A server that reports no
 * redis_version is not judged: its first script will tell. */
static int version_judge(const char *info)
{
    char api[64], name[64] = "redis", field[80], version[64];
    if (!info_field(info, "redis_version", api, sizeof(api))) {
        return RLOCK_OK;
    }
    (void)info_field(info, "server_name", name, sizeof(name));
    snprintf(field, sizeof(field), "%s_version", name);
    if (!info_field(info, field, version, sizeof(version))) {
        snprintf(version, sizeof(version), "%s", api);
    }
    char *end = NULL;
    long major = strtol(api, &end, 10);
    long minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    if (major * 100 + minor >= VERSION_MIN) {
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_ENOTSUP,
                   "the server is %s %s; rlock's scripts need Lua script flags "
                   "(Redis >= 7.0 or Valkey)",
                   name, version);
}

int rlk_client_check_version(rlock_client *c, rlk_conn *conn)
{
    const char *argv[2] = {"INFO", "server"};
    redisReply *rep = NULL;
    int r = rlk_conn_command(conn, 2, argv, NULL, &rep);
    if (r != RLOCK_OK) {
        return r;
    }
    if (rep->type == REDIS_REPLY_STRING) {
        r = version_judge(rep->str);
    } else {
        /* A least-privilege user may be denied INFO: its locks still work on a recent server,
         * so the check is skipped rather than refusing the client. */
        rlk_log(c, RLOCK_LOG_INFO, "server version not checked: INFO server answered %s",
                rep->type == REDIS_REPLY_ERROR ? rep->str : "no text");
    }
    freeReplyObject(rep);
    return r;
}
