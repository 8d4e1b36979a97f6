/*
 * rlock_survey(): the locks, semaphores and latches whose names match a pattern (`rlock top`).
 * SCAN on every master, then per master one pipeline of lua/inspect.lua run by EVALSHA_RO (Redis
 * refuses any write in it; EVALSHA for a user allowed only that) decoded by inspect.c's decoder,
 * and one pipeline of plain reads for the counters (semaphores, latches). Nothing is written.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "client_fork.h"
#include "cluster.h"
#include "cluster_slot.h"
#include "conn.h"
#include "error.h"
#include "inspect_decode.h"
#include "pool.h"
#include "route.h"
#include "scripts.h"
#include "survey.h"
#include "util.h"

#define SURVEY_PATTERN_MAX  1024
#define SURVEY_SCAN_COUNT   "1000"
#define SURVEY_CHUNK        512 /* commands sent before their replies are read */
#define SURVEY_KEYS         6   /* inspect.lua's keys */
#define SURVEY_COUNTER_CMDS 4   /* GET, PTTL, ZRANGE of the leases, PUBSUB NUMSUB */

/* One master: the names found there and the replies read for them. */
typedef struct survey_node {
    int slot; /* a slot the master serves (cluster), -1 otherwise */
    const char *pattern;
    char **names;
    size_t n, cap;
    redisReply **replies; /* n (inspect) or n * SURVEY_COUNTER_CMDS + 1 (counters) */
    size_t n_replies;
    int plain_eval; /* EVALSHA instead of EVALSHA_RO, for a user allowed only the former */
    size_t *sel;    /* the names the counter pipeline reads, and how many */
    size_t n_sel;
} survey_node;

/* The result being built. */
typedef struct survey_out {
    rlock_object_info *v;
    size_t n, cap;
} survey_out;

static void survey_free_replies(survey_node *nd)
{
    for (size_t i = 0; i < nd->n_replies; i++) {
        if (nd->replies[i] != NULL) {
            freeReplyObject(nd->replies[i]);
        }
    }
    free(nd->replies);
    nd->replies = NULL;
    nd->n_replies = 0;
}

static void survey_free_node(survey_node *nd)
{
    survey_free_replies(nd);
    for (size_t i = 0; i < nd->n; i++) {
        free(nd->names[i]);
    }
    free(nd->names);
    free(nd->sel);
    memset(nd, 0, sizeof(*nd));
}

static int survey_add_name(survey_node *nd, const char *p, size_t len)
{
    if (nd->n == nd->cap) {
        size_t cap = nd->cap ? nd->cap * 2 : 64;
        char **v = realloc(nd->names, cap * sizeof(*v));
        if (v == NULL) {
            return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for %zu names", cap);
        }
        nd->names = v;
        nd->cap = cap;
    }
    char *s = malloc(len + 1);
    if (s == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for a name");
    }
    memcpy(s, p, len);
    s[len] = '\0';
    nd->names[nd->n++] = s;
    return RLOCK_OK;
}

/* The prefixes of the keys (and of the channel names that scripts take as keys) derived from a
 * name as "<prefix>{name}": rlock's and Redisson's, as the scripts in lua/ name them. */
static const char *const survey_prefixes[] = {
    "redisson_lock_queue:",    "redisson_lock_timeout:",
    "redisson_lock_token:",    "rlock_rwlock_writers:",
    "rlock_lock_waiters:",     "rlock_lock_wake:",
    "redisson_lock__channel:", "redisson_rwlock:",
    "rlock_rwlock_writer:",    "redisson_sc:",
    "rlock_election:",         "redisson_countdownlatch__channel__"};

/* Suffixes of keys rlock and Redisson derive as "{name}<marker>..." ("name<marker>..." for a
 * name with a hash tag): strings and hashes that would otherwise look like a counter or a lock.
 * A read hold's timeout key is "<base>:<uuid>:<thread>:rwlock_timeout[:<n>]". */
static const char *const survey_markers[] = {":rlock_request:", ":rlock_once", ":rlock_election",
                                             ":rwlock_timeout"};

static const char *survey_memmem(const char *hay, size_t n, const char *needle, size_t m)
{
    for (size_t i = 0; m <= n && i <= n - m; i++) {
        if (memcmp(hay + i, needle, m) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/* "{name}" stands for name (a name without a hash tag wrapped for its slot); anything else for
 * itself. */
static void survey_unwrap(const char **base, size_t *blen)
{
    const char *close = *blen > 2 ? memchr(*base, '}', *blen) : NULL;
    if ((*base)[0] == '{' && close == *base + *blen - 1) {
        (*base)++;
        *blen -= 2;
    }
}

/* The part of a marked key before its marker, as a name; 0 when the key has no marker. */
static int survey_marked(const char *key, size_t len, const char **base, size_t *blen)
{
    for (size_t i = 0; i < sizeof(survey_markers) / sizeof(*survey_markers); i++) {
        const char *m = survey_memmem(key, len, survey_markers[i], strlen(survey_markers[i]));
        if (m == NULL) {
            continue;
        }
        *base = key;
        *blen = (size_t)(m - key);
        /* A read hold's timeout: drop ":<uuid>:<thread>" before the marker too. */
        for (int seg = 0; i == 3 && seg < 2 && *blen > 0; seg++) {
            while (*blen > 0 && key[*blen - 1] != ':') {
                (*blen)--;
            }
            *blen -= *blen > 0;
        }
        survey_unwrap(base, blen);
        return 1;
    }
    return 0;
}

int rlk_survey_base(const char *key, size_t len, const char **base, size_t *blen)
{
    *base = key;
    *blen = len;
    for (size_t i = 0; i < sizeof(survey_prefixes) / sizeof(*survey_prefixes); i++) {
        size_t pl = strlen(survey_prefixes[i]);
        if (len > pl && memcmp(key, survey_prefixes[i], pl) == 0) {
            *base = key + pl;
            *blen = len - pl;
            if (*blen > 7 && memcmp(*base + *blen - 7, ":grants", 7) == 0) {
                *blen -= 7;
            }
            survey_unwrap(base, blen);
            return *blen > 0;
        }
    }
    if (survey_marked(key, len, base, blen)) {
        return *blen > 0;
    }
    return 1;
}

static int survey_take_key(survey_node *nd, const redisReply *k)
{
    if (k->type != REDIS_REPLY_STRING) {
        return rlk_err(RLOCK_EPROTO, "rlock_survey: SCAN gave a key that is not a string");
    }
    const char *base = NULL;
    size_t blen = 0;
    if (!rlk_survey_base(k->str, k->len, &base, &blen) || blen == 0) {
        return RLOCK_OK;
    }
    if (base != k->str || blen != k->len) {
        char *s = malloc(blen + 1);
        if (s == NULL) {
            return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for a name");
        }
        memcpy(s, base, blen);
        s[blen] = '\0';
        int match = fnmatch(nd->pattern, s, 0) == 0;
        free(s);
        if (!match) {
            return RLOCK_OK;
        }
    }
    return survey_add_name(nd, base, blen);
}

/* One SCAN call: the next cursor into cursor, the keys into nd. */
static int survey_scan_once(rlk_conn *conn, survey_node *nd, char *cursor, size_t cap)
{
    const char *argv[] = {"SCAN", cursor, "MATCH", nd->pattern, "COUNT", SURVEY_SCAN_COUNT};
    size_t lens[6];
    for (int i = 0; i < 6; i++) {
        lens[i] = strlen(argv[i]);
    }
    redisReply *r = NULL;
    int rc = rlk_conn_command(conn, 6, argv, lens, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = rlk_err(RLOCK_EREDIS, "SCAN failed: %s", r->str);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= cap ||
               r->element[1]->type != REDIS_REPLY_ARRAY) {
        rc = rlk_err(RLOCK_EPROTO, "SCAN: unexpected reply shape");
    } else {
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        for (size_t i = 0; rc == RLOCK_OK && i < r->element[1]->elements; i++) {
            rc = survey_take_key(nd, r->element[1]->element[i]);
        }
    }
    freeReplyObject(r);
    return rc;
}

static int survey_scan_exchange(rlk_conn *conn, void *arg, redisReply **out)
{
    survey_node *nd = arg;
    *out = NULL;
    /* A resend on a fresh connection starts the iteration again. */
    for (size_t i = 0; i < nd->n; i++) {
        free(nd->names[i]);
    }
    nd->n = 0;
    char cursor[32] = "0";
    int rc = RLOCK_OK;
    do {
        rc = survey_scan_once(conn, nd, cursor, sizeof(cursor));
    } while (rc == RLOCK_OK && strcmp(cursor, "0") != 0);
    return rc;
}

/* Queues EVALSHA_RO (or EVALSHA) of inspect.lua for name, with rlock_inspect()'s keys. */
static int survey_append_inspect(rlk_conn *conn, const char *name, int plain_eval)
{
    static const char *const prefix[SURVEY_KEYS] = {NULL,
                                                    "redisson_lock_queue",
                                                    "redisson_lock_timeout",
                                                    "redisson_lock_token",
                                                    "rlock_rwlock_writers",
                                                    "rlock_lock_waiters"};
    const rlk_script_src *s = rlk_script_get(RLK_SCRIPT_INSPECT);
    size_t len = strlen(name);
    rlk_buf keys[SURVEY_KEYS];
    const char *argv[3 + SURVEY_KEYS] = {plain_eval ? "EVALSHA" : "EVALSHA_RO", s->sha1, "6", name};
    size_t lens[3 + SURVEY_KEYS] = {plain_eval ? 7 : 10, 40, 1, len};
    int rc = RLOCK_OK;
    for (int i = 1; i < SURVEY_KEYS; i++) {
        rlk_buf_init(&keys[i]);
        rc = rc ? rc : rlk_prefix_name(&keys[i], prefix[i], name, len);
        argv[3 + i] = keys[i].p;
        lens[3 + i] = keys[i].len;
    }
    rc = rc ? rc : rlk_conn_append(conn, 3 + SURVEY_KEYS, argv, lens);
    for (int i = 1; i < SURVEY_KEYS; i++) {
        rlk_buf_free(&keys[i]);
    }
    return rc;
}

/* Reads count replies into nd->replies from index at. */
static int survey_read(rlk_conn *conn, survey_node *nd, size_t count)
{
    int rc = RLOCK_OK;
    for (size_t i = 0; rc == RLOCK_OK && i < count; i++) {
        rc = rlk_conn_read(conn, &nd->replies[nd->n_replies]);
        nd->n_replies += rc == RLOCK_OK;
    }
    return rc;
}

static int survey_alloc_replies(survey_node *nd, size_t count)
{
    survey_free_replies(nd);
    nd->replies = calloc(count ? count : 1, sizeof(redisReply *));
    return nd->replies != NULL ? RLOCK_OK
                               : rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for replies");
}

static int survey_inspect_exchange(rlk_conn *conn, void *arg, redisReply **out)
{
    survey_node *nd = arg;
    *out = NULL;
    int rc = survey_alloc_replies(nd, nd->n);
    rc = rc ? rc : rlk_script_load(conn, RLK_SCRIPT_INSPECT);
    for (size_t i = 0; rc == RLOCK_OK && i < nd->n; i += SURVEY_CHUNK) {
        size_t end = i + SURVEY_CHUNK < nd->n ? i + SURVEY_CHUNK : nd->n;
        for (size_t j = i; rc == RLOCK_OK && j < end; j++) {
            rc = survey_append_inspect(conn, nd->names[j], nd->plain_eval);
        }
        rc = rc ? rc : survey_read(conn, nd, end - i);
    }
    return rc;
}

/* Queues the counter reads of name: GET, PTTL, the leases, the listeners of both channels. */
static int survey_append_counter(rlk_conn *conn, const char *name)
{
    size_t len = strlen(name);
    rlk_buf lease, sem, latch;
    rlk_buf_init(&lease);
    rlk_buf_init(&sem);
    rlk_buf_init(&latch);
    int rc = rlk_suffix_name(&lease, name, len, "timeout");
    rc = rc ? rc : rlk_prefix_name(&sem, "redisson_sc", name, len);
    rc = rc ? rc : rlk_buf_appends(&latch, "redisson_countdownlatch__channel__{");
    rc = rc ? rc : rlk_buf_append(&latch, name, len);
    rc = rc ? rc : rlk_buf_appends(&latch, "}");
    const char *get[] = {"GET", name}, *pttl[] = {"PTTL", name};
    const char *zr[] = {"ZRANGE", lease.p, "0", "-1", "WITHSCORES"};
    const char *ns[] = {"PUBSUB", "NUMSUB", sem.p, latch.p};
    size_t gl[] = {3, len}, pl[] = {4, len}, zl[] = {6, lease.len, 1, 2, 10};
    size_t nl[] = {6, 6, sem.len, latch.len};
    rc = rc ? rc : rlk_conn_append(conn, 2, get, gl);
    rc = rc ? rc : rlk_conn_append(conn, 2, pttl, pl);
    rc = rc ? rc : rlk_conn_append(conn, 5, zr, zl);
    rc = rc ? rc : rlk_conn_append(conn, 4, ns, nl);
    rlk_buf_free(&lease);
    rlk_buf_free(&sem);
    rlk_buf_free(&latch);
    return rc ? rlk_err(rc, "rlock_survey: cannot queue a counter's reads") : RLOCK_OK;
}

/* TIME, then the counter reads of the selected names. */
static int survey_counter_exchange(rlk_conn *conn, void *arg, redisReply **out)
{
    survey_node *nd = arg;
    *out = NULL;
    const char *time_argv[] = {"TIME"};
    size_t time_len[] = {4};
    int rc = survey_alloc_replies(nd, nd->n_sel * SURVEY_COUNTER_CMDS + 1);
    rc = rc ? rc : rlk_conn_append(conn, 1, time_argv, time_len);
    rc = rc ? rc : survey_read(conn, nd, 1);
    for (size_t i = 0; rc == RLOCK_OK && i < nd->n_sel; i += SURVEY_CHUNK) {
        size_t end = i + SURVEY_CHUNK < nd->n_sel ? i + SURVEY_CHUNK : nd->n_sel;
        for (size_t j = i; rc == RLOCK_OK && j < end; j++) {
            rc = survey_append_counter(conn, nd->names[nd->sel[j]]);
        }
        rc = rc ? rc : survey_read(conn, nd, (end - i) * SURVEY_COUNTER_CMDS);
    }
    return rc;
}

/* Runs fn on the node's master: the client's pool, or the cluster master of nd->slot. */
static int survey_run(rlock_client *c, survey_node *nd, rlk_exchange_fn fn)
{
    redisReply *out = NULL;
    int rc = RLOCK_OK;
    if (c->cluster != NULL) {
        uint64_t epoch = 0;
        rlk_pool *pool = rlk_cluster_pool(c->cluster, nd->slot, &epoch);
        rc = pool != NULL ? rlk_pool_run_on(c, pool, RLK_IDEMPOTENT, fn, nd, &out) : RLOCK_ENOMEM;
    } else {
        rc = rlk_pool_run(c, RLK_IDEMPOTENT, fn, nd, &out);
    }
    if (out != NULL) {
        freeReplyObject(out);
    }
    return rc;
}

static int survey_push(survey_out *o, rlock_object_info **slot)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        rlock_object_info *v = realloc(o->v, cap * sizeof(*v));
        if (v == NULL) {
            return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for %zu entries", cap);
        }
        o->v = v;
        o->cap = cap;
    }
    *slot = &o->v[o->n++];
    memset(*slot, 0, sizeof(**slot));
    return RLOCK_OK;
}

static char *survey_strdup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* One inspect reply: a lock becomes an entry, a string a counter to read next, the rest
 * nothing. A refusal (NOPERM) fails the survey; another error reply (a slot that moved during
 * the survey) leaves the name out. */
static int survey_take_inspect(survey_node *nd, size_t i, survey_out *o)
{
    const redisReply *r = i < nd->n_replies ? nd->replies[i] : NULL;
    if (r == NULL) {
        return rlk_err(RLOCK_EPROTO, "rlock_survey: a reply is missing");
    }
    if (r->type == REDIS_REPLY_ERROR) {
        return strncmp(r->str, "NOPERM", 6) == 0 ? rlk_err(RLOCK_EREDIS, "rlock_survey: %s", r->str)
                                                 : RLOCK_OK;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 0) {
        const redisReply *t = r->element[1];
        if (t->type == REDIS_REPLY_STRING && strcmp(t->str, "string") == 0 && nd->sel != NULL) {
            nd->sel[nd->n_sel++] = i;
        }
        return RLOCK_OK;
    }
    rlock_lock_info *info = calloc(1, sizeof(*info));
    if (info == NULL || (info->name = survey_strdup(nd->names[i], strlen(nd->names[i]))) == NULL) {
        free(info);
        return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for a lock");
    }
    int rc = rlk_inspect_check_reply(r, info);
    rlock_object_info *e = NULL;
    /* Nothing at the name (a name derived from a stale auxiliary key) is no entry. */
    int empty = rc == RLOCK_OK && info->type == RLOCK_TYPE_FREE;
    if (rc == RLOCK_OK && !empty) {
        rc = survey_push(o, &e);
    }
    if (rc != RLOCK_OK || e == NULL) {
        rlock_lock_info_free(info);
        return rc;
    }
    e->name = survey_strdup(info->name, strlen(info->name));
    e->type = RLOCK_OBJECT_LOCK;
    e->lock = info;
    e->ttl_ms = info->ttl_ms;
    return e->name != NULL ? RLOCK_OK : rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory");
}

static int64_t survey_int(const redisReply *r, int64_t dflt)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        return r->integer;
    }
    if (r->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        long long v = strtoll(r->str, &end, 10);
        return end != r->str && *end == '\0' ? v : dflt;
    }
    return dflt;
}

/* The leased permits from ZRANGE ... WITHSCORES: ids as hex, those expired by now counted. */
static int survey_leases(const redisReply *z, int64_t now, rlock_object_info *e, int64_t *expired)
{
    static const char hex[] = "0123456789abcdef";
    *expired = 0;
    if (z->type != REDIS_REPLY_ARRAY || z->elements < 2) {
        return RLOCK_OK;
    }
    e->leases = calloc(z->elements / 2, sizeof(*e->leases));
    if (e->leases == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for leases");
    }
    for (size_t i = 0; i + 1 < z->elements; i += 2) {
        const redisReply *id = z->element[i];
        if (id->type != REDIS_REPLY_STRING) {
            continue;
        }
        rlock_lock_waiter *w = &e->leases[e->n_leases++];
        w->deadline_ms = survey_int(z->element[i + 1], -1);
        w->owner = malloc(id->len * 2 + 1);
        if (w->owner == NULL) {
            return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory for a lease");
        }
        for (size_t k = 0; k < id->len; k++) {
            w->owner[2 * k] = hex[(unsigned char)id->str[k] >> 4];
            w->owner[2 * k + 1] = hex[(unsigned char)id->str[k] & 15];
        }
        w->owner[id->len * 2] = '\0';
        *expired += w->deadline_ms >= 0 && w->deadline_ms <= now;
    }
    return RLOCK_OK;
}

/* PUBSUB NUMSUB's {semaphore channel, n, latch channel, n}: which one listens. */
static void survey_judge(const redisReply *ns, rlock_object_info *e)
{
    if (e->n_leases > 0) {
        e->type = RLOCK_OBJECT_SEMAPHORE_LEASED;
    }
    if (ns->type != REDIS_REPLY_ARRAY || ns->elements != 4) {
        e->listeners = -1;
        return;
    }
    int64_t sem = survey_int(ns->element[1], 0), latch = survey_int(ns->element[3], 0);
    if (e->type == RLOCK_OBJECT_SEMAPHORE_LEASED) {
        e->listeners = sem;
    } else if (latch > 0 && sem == 0) {
        e->type = RLOCK_OBJECT_LATCH;
        e->listeners = latch;
    } else {
        e->type = sem > 0 ? RLOCK_OBJECT_SEMAPHORE : RLOCK_OBJECT_COUNTER;
        e->listeners = sem;
    }
}

/* The k-th selected name's four replies (after TIME, at index 0). */
static int survey_take_counter(survey_node *nd, size_t k, int64_t now, survey_out *o)
{
    redisReply **r = nd->replies + 1 + k * SURVEY_COUNTER_CMDS;
    int64_t count = survey_int(r[0], INT64_MIN);
    if (count == INT64_MIN) {
        return RLOCK_OK; /* gone, or a string that is no counter */
    }
    rlock_object_info *e = NULL;
    int rc = survey_push(o, &e);
    if (rc != RLOCK_OK) {
        return rc;
    }
    const char *name = nd->names[nd->sel[k]];
    e->name = survey_strdup(name, strlen(name));
    e->ttl_ms = survey_int(r[1], -1);
    e->type = RLOCK_OBJECT_COUNTER;
    int64_t expired = 0;
    rc = e->name != NULL ? survey_leases(r[2], now, e, &expired)
                         : rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory");
    e->count = count + expired;
    survey_judge(r[3], e);
    return rc;
}

static int survey_counters(rlock_client *c, survey_node *nd, survey_out *o)
{
    if (nd->n_sel == 0) {
        return RLOCK_OK;
    }
    int rc = survey_run(c, nd, survey_counter_exchange);
    if (rc != RLOCK_OK) {
        return rc;
    }
    const redisReply *t = nd->replies[0];
    int64_t now = 0;
    if (t->type == REDIS_REPLY_ARRAY && t->elements == 2) {
        now = survey_int(t->element[0], 0) * 1000 + survey_int(t->element[1], 0) / 1000;
    }
    for (size_t k = 0; rc == RLOCK_OK && k < nd->n_sel; k++) {
        rc = survey_take_counter(nd, k, now, o);
    }
    return rc;
}

static int survey_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the node's names and drops repeats (a lock found by its key and by its queue). */
static void survey_unique(survey_node *nd)
{
    qsort(nd->names, nd->n, sizeof(*nd->names), survey_cmp_names);
    size_t w = 0;
    for (size_t i = 0; i < nd->n; i++) {
        if (w > 0 && strcmp(nd->names[w - 1], nd->names[i]) == 0) {
            free(nd->names[i]);
        } else {
            nd->names[w++] = nd->names[i];
        }
    }
    nd->n = w;
}

/* One master: scan, inspect every name, read the counters. */
static int survey_node_run(rlock_client *c, survey_node *nd, survey_out *o)
{
    int rc = survey_run(c, nd, survey_scan_exchange);
    if (rc != RLOCK_OK || nd->n == 0) {
        return rc;
    }
    survey_unique(nd);
    nd->sel = calloc(nd->n, sizeof(*nd->sel));
    rc = nd->sel != NULL ? survey_run(c, nd, survey_inspect_exchange)
                         : rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory");
    /* docs/acl.md's lock user may run EVALSHA but not EVALSHA_RO: the script only reads, so
     * it runs the same by EVALSHA. */
    const redisReply *r0 = rc == RLOCK_OK ? nd->replies[0] : NULL;
    if (r0 != NULL && r0->type == REDIS_REPLY_ERROR && strstr(r0->str, "evalsha_ro") != NULL) {
        nd->plain_eval = 1;
        rc = survey_run(c, nd, survey_inspect_exchange);
    }
    for (size_t i = 0; rc == RLOCK_OK && i < nd->n; i++) {
        rc = survey_take_inspect(nd, i, o);
    }
    return rc == RLOCK_OK ? survey_counters(c, nd, o) : rc;
}

/* The masters to scan: one slot of each (a cluster), or the client's one node. */
static int survey_nodes(rlock_client *c, int **slots, size_t *n)
{
    *n = 0;
    /* The second half records the masters seen (a map's node indexes), off the stack: a
     * caller's thread may have a small one. */
    *slots = calloc(2 * (size_t)RLK_CLUSTER_SLOTS, sizeof(**slots));
    if (*slots == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_survey: no memory");
    }
    if (c->cluster == NULL) {
        (*slots)[(*n)++] = -1;
        return RLOCK_OK;
    }
    int *seen = *slots + RLK_CLUSTER_SLOTS;
    size_t n_seen = 0;
    for (int slot = 0; slot < RLK_CLUSTER_SLOTS; slot++) {
        int node = rlk_cluster_node_of(c->cluster, slot);
        int known = node < 0;
        for (size_t i = 0; !known && i < n_seen; i++) {
            known = seen[i] == node;
        }
        if (!known) {
            seen[n_seen++] = node;
            (*slots)[(*n)++] = slot;
        }
    }
    return RLOCK_OK;
}

static int survey_all(rlock_client *c, const char *pattern, survey_out *o)
{
    int *slots = NULL;
    size_t n_nodes = 0;
    int rc = survey_nodes(c, &slots, &n_nodes);
    for (size_t i = 0; rc == RLOCK_OK && i < n_nodes; i++) {
        survey_node nd = {.slot = slots[i], .pattern = pattern};
        rc = survey_node_run(c, &nd, o);
        survey_free_node(&nd);
    }
    free(slots);
    return rc;
}

RLOCK_EXPORT int rlock_survey(rlock_client *client, const char *pattern, rlock_object_info **out,
                              size_t *n)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (n != NULL) {
        *n = 0;
    }
    if (pattern == NULL || pattern[0] == '\0') {
        pattern = "*";
    }
    if (client == NULL || out == NULL || n == NULL ||
        strnlen(pattern, SURVEY_PATTERN_MAX + 1) > SURVEY_PATTERN_MAX) {
        return rlk_err(RLOCK_EINVAL,
                       "rlock_survey: client, out and n are required, and a "
                       "pattern of at most %d bytes",
                       SURVEY_PATTERN_MAX);
    }
    int rc = rlk_client_enter(client);
    if (rc != RLOCK_OK) {
        return rc;
    }
    survey_out o = {0};
    rc = survey_all(client, pattern, &o);
    if (rc != RLOCK_OK) {
        rlock_survey_free(o.v, o.n);
        return rc;
    }
    *out = o.v;
    *n = o.n;
    return RLOCK_OK;
}

RLOCK_EXPORT void rlock_survey_free(rlock_object_info *objects, size_t n)
{
    if (objects == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        rlock_object_info *e = &objects[i];
        for (size_t k = 0; k < e->n_leases; k++) {
            free(e->leases[k].owner);
        }
        free(e->leases);
        rlock_lock_info_free(e->lock);
        free(e->name);
    }
    free(objects);
}
