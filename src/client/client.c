/*
 * Options, the client's lifecycle and its identity. A client owns the pool, the subscriber and
 * the watchdog; handles keep the client's memory alive (refs) so that a call on a handle after
 * rlock_client_free() is detected and answered with RLOCK_ECLOSED instead of a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "client.h"
#include "client_fork.h"
#include "client_version.h"
#include "cluster.h"
#include "conn_open.h"
#include "error.h"
#include "pool.h"
#include "pubsub.h"
#include "pubsub_conn.h"
#include "replica.h"
#include "sentinel.h"
#include "tls.h"
#include "watchdog.h"

RLOCK_EXPORT void rlock_options_init(rlock_options *opts)
{
    if (opts == NULL) {
        return;
    }
    memset(opts, 0, sizeof(*opts));
    opts->url = "redis://127.0.0.1:6379";
    opts->pool_size = 64;
    opts->connect_timeout_ms = 10000;
    opts->command_timeout_ms = 3000;
    opts->watchdog_timeout_ms = 30000;
    opts->fair_wait_ms = 300000;
    opts->waiter_timeout_ms = 5000;
    opts->subscription_timeout_ms = 7500;
    opts->redlock_server_timeout_ms = 50;
    opts->rw_reader_preferring = 0;
    opts->log_level = RLOCK_LOG_WARN;
    opts->replica_sync = 1;
    opts->replica_sync_timeout_ms = 1000;
}

static int check_duration(const char *what, int64_t v, int64_t min)
{
    if (v < min || v > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "%s must be in [%lld, %lld] ms, got %lld", what,
                       (long long)min, (long long)RLOCK_MAX_DURATION_MS, (long long)v);
    }
    return RLOCK_OK;
}

static int check_options(const rlock_options *o)
{
    if (o->pool_size < 1 || o->pool_size > 4096) {
        return rlk_err(RLOCK_EINVAL, "pool_size must be in [1, 4096], got %d", o->pool_size);
    }
    int r = check_duration("connect_timeout_ms", o->connect_timeout_ms, 1);
    r = r ? r : check_duration("command_timeout_ms", o->command_timeout_ms, 1);
    /* The watchdog renews every third of the lease, so it needs at least a few ms to work with. */
    r = r ? r : check_duration("watchdog_timeout_ms", o->watchdog_timeout_ms, 30);
    r = r ? r : check_duration("fair_wait_ms", o->fair_wait_ms, 1);
    r = r ? r : check_duration("waiter_timeout_ms", o->waiter_timeout_ms, 30);
    r = r ? r : check_duration("subscription_timeout_ms", o->subscription_timeout_ms, 1);
    r = r ? r : check_duration("redlock_server_timeout_ms", o->redlock_server_timeout_ms, 1);
    /* WAIT reads a timeout of 0 as "forever", which a lock call must never wait. */
    r = r ? r : check_duration("replica_sync_timeout_ms", o->replica_sync_timeout_ms, 1);
    if (r == RLOCK_OK && (o->cluster_pubsub < RLOCK_CLUSTER_PUBSUB_AUTO ||
                          o->cluster_pubsub > RLOCK_CLUSTER_PUBSUB_CLASSIC)) {
        r = rlk_err(
            RLOCK_EINVAL,
            "cluster_pubsub must be RLOCK_CLUSTER_PUBSUB_AUTO, _SHARDED or _CLASSIC, got %d",
            o->cluster_pubsub);
    }
    return r;
}

static void client_destroy(rlock_client *c)
{
    pthread_mutex_destroy(&c->master_mu);
    rlk_obs_destroy(&c->obs);
    free(c->sentinel_user);
    free(c->sentinel_password);
    rlk_tls_free(c->tls);
    for (size_t i = 0; i < sizeof(c->tls_copies) / sizeof(c->tls_copies[0]); i++) {
        free(c->tls_copies[i]);
    }
    rlk_url_free(&c->url);
    free(c->url_copy);
    free(c);
}

void rlk_client_ref(rlock_client *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void rlk_client_unref(rlock_client *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        client_destroy(c);
    }
}

static void client_stop(rlock_client *c)
{
    atomic_store(&c->closed, 1);
    /* A loop client's state (src/loop) completes its pending operations and closes its
     * connections; the parts below are NULL for it. */
    if (c->loop_stop != NULL) {
        c->loop_stop(c);
    }
    /* The watchdog goes first: it borrows pool connections, so the pool must outlive it. */
    /* Cleared before the free: rlk_wd_cancel() treats a NULL watchdog as "nothing registered". */
    rlk_watchdog *wd = c->watchdog;
    c->watchdog = NULL;
    rlk_watchdog_free(wd);
    rlk_pubsub_free(c->pubsub);
    c->pubsub = NULL;
    rlk_pool_free(c->pool);
    c->pool = NULL;
    rlk_cluster_free(c->cluster);
    c->cluster = NULL;
}

/* Chooses a cluster client's pub/sub mode as Redisson does (ClusterServersConfig's
 * shardedSubscriptionMode): forced by the option, or, in auto mode, sharded when the node answers
 * PUBSUB SHARDNUMSUB 0 (Redis >= 7.0); Redisson asks nothing else (no version, no CLUSTER
 * SHARDS), so rlock decides the same on the same cluster. A refused probe (an older server, an
 * ACL without it) means classic. Only a lost connection is an error. */
static int client_pubsub_mode(rlock_client *c, rlk_conn *conn)
{
    c->sharded = c->cluster != NULL && c->opts.cluster_pubsub == RLOCK_CLUSTER_PUBSUB_SHARDED;
    if (c->cluster == NULL || c->opts.cluster_pubsub != RLOCK_CLUSTER_PUBSUB_AUTO) {
        return RLOCK_OK;
    }
    const char *argv[3] = {"PUBSUB", "SHARDNUMSUB", "0"};
    redisReply *rep = NULL;
    int r = rlk_conn_command(conn, 3, argv, NULL, &rep);
    c->sharded = r == RLOCK_OK && rep->type == REDIS_REPLY_ARRAY;
    freeReplyObject(rep);
    rlk_log(c, RLOCK_LOG_INFO, "cluster pub/sub: %s", c->sharded ? "sharded" : "classic");
    return r;
}

/* Dials one connection and PINGs the server, so that a wrong URL, password or db, a server
 * that accepts connections but does not answer (stopped, overloaded), and one too old for the
 * scripts, are reported by rlock_client_new() rather than by the first lock call. A TCP connect
 * alone proves little: the kernel completes it even for a SIGSTOPped server. Dial and PING together
 * are bounded by connect_timeout_ms, as the header promises; the connection then joins the pool. */
static int client_probe(rlock_client *c)
{
    int64_t deadline = rlk_add_sat(rlk_now_ms(), c->opts.connect_timeout_ms);
    rlk_conn *conn = NULL;
    int r = rlk_conn_open(c, deadline, c->opts.command_timeout_ms, &conn);
    if (r != RLOCK_OK) {
        return r;
    }
    int64_t left = deadline - rlk_now_ms();
    const char *argv[1] = {"PING"};
    redisReply *rep = NULL;
    r = rlk_conn_set_timeout(conn, left < 1 ? 1 : left);
    r = r ? r : rlk_conn_command(conn, 1, argv, NULL, &rep);
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        int auth = strncmp(rep->str, "NOAUTH", 6) == 0 || strncmp(rep->str, "WRONGPASS", 9) == 0;
        r = rlk_err(auth ? RLOCK_EAUTH : RLOCK_EREDIS, "PING refused by Redis: %s", rep->str);
    }
    freeReplyObject(rep);
    r = r ? r : rlk_client_check_version(c, conn);
    r = r ? r : client_pubsub_mode(c, conn);
    r = r ? r : rlk_replica_init(c, conn);
    r = r ? r : rlk_conn_set_timeout(conn, c->opts.command_timeout_ms);
    if (r != RLOCK_OK) {
        rlk_conn_close(conn);
        return r;
    }
    rlk_pool_adopt(c->pool, conn);
    return RLOCK_OK;
}

/* Finds the data node of a Sentinel deployment, or reads a cluster's slot map (and picks its
 * home node), before anything dials it. */
static int client_locate(rlock_client *c)
{
    if (c->url.kind == RLK_URL_CLUSTER) {
        return rlk_cluster_new(c, rlk_add_sat(rlk_now_ms(), c->opts.connect_timeout_ms));
    }
    if (c->url.kind != RLK_URL_SENTINEL) {
        return RLOCK_OK;
    }
    return rlk_sentinel_discover(c, rlk_add_sat(rlk_now_ms(), c->opts.connect_timeout_ms));
}

/* Copies the options' strings that the client keeps. */
static int client_copy_strings(rlock_client *c, const rlock_options *o)
{
    c->sentinel_user = o->sentinel_user != NULL ? strdup(o->sentinel_user) : NULL;
    c->sentinel_password = o->sentinel_password != NULL ? strdup(o->sentinel_password) : NULL;
    c->opts.sentinel_user = c->sentinel_user;
    c->opts.sentinel_password = c->sentinel_password;
    if ((o->sentinel_user != NULL && c->sentinel_user == NULL) ||
        (o->sentinel_password != NULL && c->sentinel_password == NULL)) {
        return rlk_err(RLOCK_ENOMEM, "cannot copy the Sentinel credentials");
    }
    return RLOCK_OK;
}

/* Copies the TLS options and, when the URL or an option asks for TLS, builds the context every
 * connection shares (reading the files now, so that a wrong path fails here). */
static int client_tls(rlock_client *c)
{
    const char **opt[4] = {&c->opts.tls_ca_file, &c->opts.tls_cert_file, &c->opts.tls_key_file,
                           &c->opts.tls_server_name};
    int wanted = c->url.tls;
    for (size_t i = 0; i < 4; i++) {
        if (*opt[i] != NULL) {
            wanted = 1;
            c->tls_copies[i] = strdup(*opt[i]);
            if (c->tls_copies[i] == NULL) {
                return rlk_err(RLOCK_ENOMEM, "cannot copy the TLS options");
            }
        }
        *opt[i] = c->tls_copies[i];
    }
    return wanted ? rlk_tls_new(&c->opts, &c->tls) : RLOCK_OK;
}

static int client_start(rlock_client *c)
{
    int r = client_tls(c);
    r = r ? r : client_locate(c);
    r = r ? r : rlk_pool_new(c, &c->pool);
    r = r ? r : client_probe(c);
    r = r ? r : rlk_pubsub_new(c, &c->pubsub);
    r = r ? r : rlk_watchdog_new(c, &c->watchdog);
    return r;
}

int rlk_client_alloc(const rlock_options *opts, rlock_client **out)
{
    *out = NULL;
    rlock_options defaults;
    if (opts == NULL) {
        rlock_options_init(&defaults);
        opts = &defaults;
    }
    int r = check_options(opts);
    if (r != RLOCK_OK) {
        return r;
    }
    rlock_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a client");
    }
    c->opts = *opts;
    c->opts.sentinel_user = NULL;
    c->opts.sentinel_password = NULL;
    pthread_mutex_init(&c->master_mu, NULL);
    rlk_obs_init(&c->obs);
    atomic_init(&c->refs, 1);
    atomic_init(&c->closed, 0);
    atomic_init(&c->warned_nopublish, 0);
    atomic_init(&c->gen, rlk_fork_gen());
    char errbuf[256];
    r = rlk_url_parse(opts->url, &c->url, errbuf, sizeof(errbuf));
    if (r != RLOCK_OK) {
        client_destroy(c);
        return r == RLOCK_EINVAL ? rlk_err(r, "bad url: %s", errbuf) : rlk_err(r, "%s", errbuf);
    }
    c->url_copy = strdup(opts->url);
    if (c->url_copy == NULL) {
        client_destroy(c);
        return rlk_err(RLOCK_ENOMEM, "cannot copy the url");
    }
    c->opts.url = c->url_copy;
    r = client_copy_strings(c, opts);
    if (r != RLOCK_OK) {
        client_destroy(c);
        return r;
    }
    uuid_t id;
    uuid_generate(id);
    uuid_unparse_lower(id, c->uuid);
    *out = c;
    return RLOCK_OK;
}

void rlk_client_discard(rlock_client *c)
{
    client_destroy(c);
}

RLOCK_EXPORT int rlock_client_new(const rlock_options *opts, rlock_client **out)
{
    if (out == NULL) {
        return rlk_err(RLOCK_EINVAL, "out must not be NULL");
    }
    *out = NULL;
    rlock_client *c = NULL;
    int r = rlk_client_alloc(opts, &c);
    if (r != RLOCK_OK || c == NULL) {
        return r != RLOCK_OK ? r : RLOCK_ENOMEM;
    }
    r = client_start(c);
    if (r != RLOCK_OK) {
        /* Keep the first failure's detail: stopping may log but must not overwrite it. */
        client_stop(c);
        client_destroy(c);
        return r;
    }
    rlk_fork_register(c);
    *out = c;
    return RLOCK_OK;
}

RLOCK_EXPORT void rlock_client_free(rlock_client *client)
{
    if (client == NULL) {
        return;
    }
    rlk_fork_unregister(client);
    /* In a child of fork() whose client was never refreshed, the threads to join are the
     * parent's (they do not exist here) and the connections its: both are let go, untouched. */
    rlk_client_abandon_inherited(client);
    client_stop(client);
    rlk_client_unref(client);
}

RLOCK_EXPORT const char *rlock_client_id(const rlock_client *client)
{
    if (client == NULL) {
        return "";
    }
    /* In a child of fork() the id is the child's own: the refresh gives it a new one. */
    (void)rlk_client_enter((rlock_client *)client);
    return client->uuid;
}

RLOCK_EXPORT void rlock_client_interrupt(rlock_client *client)
{
    /* Waits sleep in the subscriber, so its flag (read under its mutex) ends them all. */
    if (client != NULL && rlk_client_enter(client) == RLOCK_OK && client->pubsub != NULL) {
        rlk_pubsub_interrupt(client->pubsub);
    }
}

_Static_assert(sizeof(((rlock_client *)0)->uuid) + 1 + 20 <= RLK_OWNER_MAX,
               "an owner (uuid, ':', up to 20 digits, NUL) must fit RLK_OWNER_MAX");

size_t rlk_owner(const rlock_client *c, uint64_t tid, char *buf)
{
    /* Formatted by hand: the watchdog writes one owner per renewal (100,000 per sweep with
     * 100,000 holds), and snprintf was a visible share of a sweep's CPU time. */
    size_t n = sizeof(c->uuid) - 1;
    memcpy(buf, c->uuid, n);
    buf[n++] = ':';
    return n + rlk_fmt_u64(buf + n, tid);
}
