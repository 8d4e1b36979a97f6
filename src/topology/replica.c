/*
 * Replica-synced writes; see replica.h. WAIT counts the replicas that acknowledged every write
 * this connection made so far, which is why it must travel on the script's own connection: on
 * another connection it would return at once and prove nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replica.h"
#include "error.h"
#include "resp_format.h"

/* The calling thread's last synced outcome and its suppression flag (replica.h). */
static _Thread_local struct {
    int is_short;
    int acked;
    int n;
    int suppress;
} rlk_sync_tls;

/* Counts "slaveN:...,state=online,..." lines: replicas still in their first sync cannot
 * acknowledge, and waiting for them would fail every grant until they are done. */
static int replica_count_online(const char *info)
{
    int n = 0;
    for (const char *p = info; p != NULL && *p != '\0';) {
        const char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        if (len > 5 && strncmp(p, "slave", 5) == 0 && p[5] >= '0' && p[5] <= '9') {
            const char *st = strstr(p, "state=online");
            n += st != NULL && st < p + len;
        }
        p = eol != NULL ? eol + 1 : NULL;
    }
    return n;
}

/* Parses "redis_version:X.Y.Z" into X * 100 + Y (0 when absent). */
static int replica_version(const char *info)
{
    const char *v = strstr(info, "redis_version:");
    if (v == NULL) {
        return 0;
    }
    char *end = NULL;
    long major = strtol(v + 14, &end, 10);
    long minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return (int)(major * 100 + minor);
}

/* Runs INFO <section> on conn and returns its text (freeReplyObject() *out). */
static int replica_info(rlk_conn *conn, const char *section, redisReply **out)
{
    const char *argv[2] = {"INFO", section};
    int r = rlk_conn_command(conn, 2, argv, NULL, out);
    if (r == RLOCK_OK && (*out)->type != REDIS_REPLY_STRING) {
        r = (*out)->type == REDIS_REPLY_ERROR
                ? rlk_err(RLOCK_EREDIS, "INFO %s refused by Redis: %s", section, (*out)->str)
                : rlk_err(RLOCK_EPROTO, "INFO %s: unexpected reply type %d", section, (*out)->type);
        freeReplyObject(*out);
        *out = NULL;
    }
    return r;
}

static int replica_acked(const redisReply *rep);

/* Records a replica count read from INFO: a higher one at once, a lower one once it has been
 * seen for RLK_REPLICA_SHRINK_MS (replica.h). */
static void replica_observe(rlk_replicas *st, int online)
{
    if (online >= atomic_load(&st->n)) {
        atomic_store(&st->n, online);
        atomic_store(&st->low_since, 0);
        return;
    }
    long long now = rlk_now_ms();
    long long since = atomic_load(&st->low_since);
    if (since == 0) {
        atomic_store(&st->low_since, now);
    } else if (now - since >= RLK_REPLICA_SHRINK_MS) {
        atomic_store(&st->n, online);
        atomic_store(&st->low_since, 0);
    }
}

/* Sets a count read when nothing was known of the node: taken as it is, with no delay. */
static void replica_learn(rlk_replicas *st, int online)
{
    atomic_store(&st->n, online);
    atomic_store(&st->low_since, 0);
    atomic_store(&st->due, rlk_now_ms() + RLK_REPLICA_REFRESH_MS);
    atomic_store(&st->known, 1);
}

/* The count a connection syncs with: its cluster node's, else the client's master's. */
static rlk_replicas *replica_of(rlock_client *c, rlk_conn *conn)
{
    return conn != NULL && conn->replicas != NULL ? conn->replicas : &c->replicas;
}

int rlk_replica_refresh(rlock_client *c, rlk_conn *conn)
{
    redisReply *rep = NULL;
    int r = c->opts.replica_sync ? replica_info(conn, "replication", &rep) : RLOCK_OK;
    if (rep != NULL) {
        replica_observe(&c->replicas, replica_count_online(rep->str));
        freeReplyObject(rep);
    }
    return r;
}

void rlk_replica_forget(rlk_replicas *st)
{
    int current = 1;
    if (st != NULL) {
        atomic_compare_exchange_strong(&st->known, &current, 2);
    }
}

void rlk_replica_inherit(rlk_replicas *to, const rlk_replicas *from)
{
    if (to == NULL || from == NULL || atomic_load(&to->known) == 1 ||
        atomic_load(&from->known) == 0) {
        return;
    }
    atomic_store(&to->n, atomic_load(&from->n));
    atomic_store(&to->low_since, 0);
    atomic_store(&to->due, 0); /* the new master's own count is read on its first synced call */
    atomic_store(&to->known, 1);
}

int rlk_replica_init(rlock_client *c, rlk_conn *conn)
{
    replica_learn(&c->replicas, 0);
    if (!c->opts.replica_sync) {
        return RLOCK_OK;
    }
    redisReply *rep = NULL;
    int r = replica_info(conn, "replication", &rep);
    if (r == RLOCK_OK && rep != NULL) {
        replica_learn(&c->replicas, replica_count_online(rep->str));
        freeReplyObject(rep);
        rep = NULL;
    } else if (r == RLOCK_EREDIS && !c->opts.replica_sync_aof) {
        /* A least-privilege user without INFO still gets locks; what it loses is said once,
         * loudly, instead of refusing every client of such a user. */
        atomic_store(&c->replicas_unknown, 1);
        rlk_log(c, RLOCK_LOG_WARN,
                "replica_sync: %s; replicas cannot be counted, so grants are not replica-synced "
                "(allow INFO to this user, or set replica_sync = 0 to silence this)",
                rlock_last_error());
        r = RLOCK_OK;
    }
    if (r == RLOCK_OK && c->opts.replica_sync_aof) {
        r = replica_info(conn, "server", &rep);
        int version = r == RLOCK_OK && rep != NULL ? replica_version(rep->str) : 0;
        freeReplyObject(rep);
        if (r == RLOCK_OK && version < 702) {
            r = rlk_err(RLOCK_ENOTSUP,
                        "replica_sync_aof needs WAITAOF (Redis >= 7.2); the server is %d.%d",
                        version / 100, version % 100);
        }
    }
    return r;
}

int rlk_sync_target(const rlock_client *c)
{
    if (!c->opts.replica_sync || rlk_sync_tls.suppress) {
        return 0;
    }
    /* A cluster's masters each have their own count, and the caller does not know yet which
     * one a request will reach: it is told that grants are synced. */
    return c->cluster != NULL ? 1 : atomic_load(&c->replicas.n);
}

/* A cluster node seen for the first time (or again after it was not a master): its replicas
 * are read on conn now, one round trip once per node, rather than waiting for as many replicas
 * as another node has. */
static int replica_first_look(rlock_client *c, rlk_conn *conn, rlk_replicas *st)
{
    if (atomic_load(&st->known) == 1 || atomic_load(&c->replicas_unknown)) {
        return RLOCK_OK;
    }
    redisReply *rep = NULL;
    int r = replica_info(conn, "replication", &rep);
    if (rep != NULL) {
        replica_learn(st, replica_count_online(rep->str));
        freeReplyObject(rep);
    }
    return r;
}

int rlk_sync_plan(rlock_client *c, rlk_conn *conn, rlk_sync *s)
{
    memset(s, 0, sizeof(*s));
    if (!c->opts.replica_sync || rlk_sync_tls.suppress) {
        return RLOCK_OK;
    }
    rlk_replicas *st = replica_of(c, conn);
    int r = replica_first_look(c, conn, st);
    if (r != RLOCK_OK) {
        s->node = st;
        s->n = atomic_load(&st->n);
        return r;
    }
    rlk_sync_plan_known(c, st, s);
    return RLOCK_OK;
}

void rlk_sync_plan_known(rlock_client *c, rlk_replicas *st, rlk_sync *s)
{
    memset(s, 0, sizeof(*s));
    if (!c->opts.replica_sync || rlk_sync_tls.suppress) {
        return;
    }
    s->node = st;
    s->n = atomic_load(&st->n);
    if (atomic_load(&c->replicas_unknown)) {
        return;
    }
    long long due = atomic_load(&st->due);
    long long now = rlk_now_ms();
    /* One thread claims each refresh, so a busy client sends one INFO a second per node, not
     * one per call. */
    s->refresh =
        now >= due && atomic_compare_exchange_strong(&st->due, &due, now + RLK_REPLICA_REFRESH_MS);
}

void rlk_replica_learn_info(rlk_replicas *st, const char *info)
{
    replica_learn(st, replica_count_online(info));
}

void rlk_sync_took(rlk_sync *s, const redisReply *wait, const redisReply *info)
{
    s->acked = wait != NULL ? replica_acked(wait) : s->n;
    if (info != NULL && info->type == REDIS_REPLY_STRING) {
        replica_observe(s->node, replica_count_online(info->str));
    }
    if (s->acked < s->n) {
        atomic_store(&s->node->due, 0); /* as in rlk_sync_read() */
    }
}

int rlk_sync_append(const rlock_client *c, rlk_conn *conn, const rlk_sync *s)
{
    int r = RLOCK_OK;
    if (!c->opts.replica_sync_aof && s->n <= 0 && !s->refresh) {
        return r; /* nothing to wait for: every command without replicas comes here */
    }
    char n[24], timeout[24];
    rlk_fmt_i64(n, s->n);
    rlk_fmt_i64(timeout, c->opts.replica_sync_timeout_ms);
    if (c->opts.replica_sync_aof) {
        const char *argv[4] = {"WAITAOF", "1", n, timeout};
        r = rlk_conn_append(conn, 4, argv, NULL);
    } else if (s->n > 0) {
        const char *argv[3] = {"WAIT", n, timeout};
        r = rlk_conn_append(conn, 3, argv, NULL);
    }
    if (r == RLOCK_OK && s->refresh) {
        const char *argv[2] = {"INFO", "replication"};
        r = rlk_conn_append(conn, 2, argv, NULL);
    }
    return r;
}

int rlk_sync_format(rlock_client *c, rlk_sync *s, char **cmd, size_t *len)
{
    memset(s, 0, sizeof(*s));
    /* A cluster client's armed attempts are never sent (pubsub_armed.c): its waiters attempt
     * through the router, which syncs with the node's own count. */
    if (!c->opts.replica_sync || rlk_sync_tls.suppress || c->cluster != NULL) {
        return 0;
    }
    s->node = &c->replicas;
    s->n = atomic_load(&c->replicas.n);
    char n[16], timeout[24];
    snprintf(n, sizeof(n), "%d", s->n);
    snprintf(timeout, sizeof(timeout), "%lld", (long long)c->opts.replica_sync_timeout_ms);
    const char *wait[3] = {"WAIT", n, timeout};
    const char *waitaof[4] = {"WAITAOF", "1", n, timeout};
    int aof = c->opts.replica_sync_aof;
    if (!aof && s->n == 0) {
        return 0;
    }
    char *tail = NULL;
    long long tl =
        aof ? rlk_resp_format(4, waitaof, NULL, &tail) : rlk_resp_format(3, wait, NULL, &tail);
    char *joined = tl < 0 ? NULL : realloc(*cmd, *len + (size_t)tl);
    if (joined == NULL) {
        free(tail);
        return rlk_err(RLOCK_ENOMEM, "cannot format a replica sync");
    }
    memcpy(joined + *len, tail, (size_t)tl);
    free(tail);
    *cmd = joined;
    *len += (size_t)tl;
    return 1;
}

/* WAIT answers the number of replicas; WAITAOF [local fsyncs, replicas], where a missing local
 * fsync counts as no acknowledgement at all. */
static int replica_acked(const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_INTEGER) {
        return (int)rep->integer;
    }
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER &&
        rep->element[1]->type == REDIS_REPLY_INTEGER) {
        return rep->element[0]->integer >= 1 ? (int)rep->element[1]->integer : -1;
    }
    return -1;
}

/* Reads the WAIT reply, which may take up to replica_sync_timeout_ms after the script's: the
 * read timeout is stretched for it when that is longer than command_timeout_ms. */
static int replica_read_wait(rlock_client *c, rlk_conn *conn, rlk_sync *s)
{
    int64_t wait_ms = c->opts.replica_sync_timeout_ms;
    int stretch = wait_ms >= c->opts.command_timeout_ms;
    int r = stretch ? rlk_conn_set_timeout(conn, rlk_add_sat(wait_ms, c->opts.command_timeout_ms))
                    : RLOCK_OK;
    redisReply *rep = NULL;
    r = r ? r : rlk_conn_read(conn, &rep);
    r = r == RLOCK_OK && stretch ? rlk_conn_set_timeout(conn, c->opts.command_timeout_ms) : r;
    if (rep != NULL) {
        s->acked = replica_acked(rep);
        if (rep->type == REDIS_REPLY_ERROR) {
            rlk_log(c, RLOCK_LOG_WARN, "replica sync: %s", rep->str);
        }
        freeReplyObject(rep);
    }
    return r;
}

int rlk_sync_read(rlock_client *c, rlk_conn *conn, rlk_sync *s)
{
    int r = RLOCK_OK;
    s->acked = s->n;
    if (c->opts.replica_sync_aof || s->n > 0) {
        r = replica_read_wait(c, conn, s);
    }
    if (r == RLOCK_OK && s->refresh) {
        redisReply *rep = NULL;
        r = rlk_conn_read(conn, &rep);
        if (r == RLOCK_OK && rep->type == REDIS_REPLY_STRING) {
            replica_observe(s->node, replica_count_online(rep->str));
        }
        freeReplyObject(rep);
    }
    if (r == RLOCK_OK && s->acked < s->n) {
        /* A replica that stopped answering may also have left: look again on the next call. */
        atomic_store(&s->node->due, 0);
    }
    return r;
}

void rlk_sync_note(const rlk_sync *s)
{
    rlk_sync_tls.is_short = s->acked < s->n;
    rlk_sync_tls.acked = s->acked < 0 ? 0 : s->acked;
    rlk_sync_tls.n = s->n;
}

int rlk_sync_short(int *acked, int *n)
{
    *acked = rlk_sync_tls.acked;
    *n = rlk_sync_tls.n;
    return rlk_sync_tls.is_short;
}

void rlk_sync_clear(void)
{
    rlk_sync_tls.is_short = 0;
}

void rlk_sync_suppress(int on)
{
    rlk_sync_tls.suppress = on;
}

int rlk_sync_error(int acked, int n, const char *what, const char *name)
{
    return rlk_err(RLOCK_EREPLICA, "%s '%s': %d of %d replicas acknowledged", what, name, acked, n);
}
