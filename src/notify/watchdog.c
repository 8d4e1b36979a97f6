/*
 * The watchdog thread: sleeps until the wheel's next expiry, takes every entry due (within a
 * slack of a tenth of a period), and renews them with no lock held, grouped by renew class and
 * lease into pipelined batches of RLK_WD_BATCH keys. A FIRING entry makes rlk_wd_cancel() wait
 * for its batch, so cancel is synchronous. docs/internals/watchdog.md explains the design.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_slot.h"
#include "error.h"
#include "pool.h"
#include "replica.h"
#include "watchdog_decode.h"
#include "scripts.h"
#include "sentinel.h"
#include "watchdog.h"

#define RLK_WD_TICK_MS 10

/* DETACHED: cancelled while in flight, its owner gone (rlk_wd_cancel_by): released when done. */
enum { RLK_WD_IDLE = 0, RLK_WD_PENDING, RLK_WD_FIRING, RLK_WD_CANCELLED, RLK_WD_DETACHED };

struct rlk_watchdog {
    rlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the thread: stop, or an earlier expiry */
    pthread_cond_t done_cv; /* a batch finished: cancellers of FIRING entries re-check */
    pthread_t thread;
    int running;
    int64_t sleep_until; /* when the sleeping thread will wake by itself */
    int64_t slack_ms;    /* entries due this soon are renewed with the current sweep */
    rlk_wheel wheel;
    rlk_wd_stats stats;
};

#define RLK_ENTRY_OF(t) RLK_CONTAINER_OF(t, rlk_wd_entry, timer)

void rlk_wd_entry_init(rlk_wd_entry *e, const rlk_renew_class *cls)
{
    memset(e, 0, sizeof(*e));
    rlk_timer_init(&e->timer);
    e->cls = cls;
}

static int64_t wd_period(int64_t lease_ms)
{
    int64_t p = lease_ms / 3;
    return p < 1 ? 1 : p;
}

/* Registers e with its lease judged held_ms from now and its first renewal due_ms from now;
 * once: unregistered after its first successful renewal. */
static int wd_add(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms, int64_t held_ms,
                  int64_t due_ms, int once)
{
    if (wd == NULL) {
        return rlk_err(RLOCK_ECLOSED, "the client was freed");
    }
    int64_t now = rlk_now_ms();
    pthread_mutex_lock(&wd->mu);
    if (!wd->running) {
        pthread_mutex_unlock(&wd->mu);
        return rlk_err(RLOCK_ECLOSED, "the client's watchdog has stopped");
    }
    e->lease_ms = lease_ms;
    e->once = once;
    e->expires_at = rlk_add_sat(now, held_ms);
    e->state = RLK_WD_PENDING;
    int64_t due = rlk_add_sat(now, due_ms);
    rlk_wheel_add(&wd->wheel, &e->timer, (uint64_t)due);
    wd->stats.registered++;
    if (due < wd->sleep_until) {
        pthread_cond_signal(&wd->cv);
    }
    pthread_mutex_unlock(&wd->mu);
    return RLOCK_OK;
}

int rlk_wd_add(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms)
{
    return wd_add(wd, e, lease_ms, lease_ms, wd_period(lease_ms), 0);
}

/* The first renewal of a granted hold is due a third of the grant TTL from now, the watchdog's
 * usual margin, not at once: a renewal sent at the grant woke the watchdog thread and had Redis
 * run one more script just as the new holder was being scheduled (a hand-off took 118-205 us with
 * it on this 2-vCPU box), and a hold released within that third needs no renewal at all. */
int rlk_wd_add_soon(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms, int64_t held_ms)
{
    return wd_add(wd, e, lease_ms, held_ms, wd_period(held_ms), 0);
}

/* The one renewal sets what is left of the explicit lease when it is due, so the hold ends when
 * the caller asked (lease_ms after the grant), up to the lateness of the watchdog's sweep. */
int rlk_wd_add_once(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms, int64_t held_ms)
{
    int64_t due = wd_period(held_ms);
    return wd_add(wd, e, lease_ms - due, held_ms, due, 1);
}

void rlk_wd_cancel(rlk_watchdog *wd, rlk_wd_entry *e)
{
    (void)rlk_wd_cancel_by(wd, e, 0);
}

int rlk_wd_cancel_by(rlk_watchdog *wd, rlk_wd_entry *e, int64_t until_ms)
{
    if (wd == NULL) {
        return 1;
    }
    int mine = 1;
    pthread_mutex_lock(&wd->mu);
    if (e->state == RLK_WD_PENDING) {
        rlk_wheel_cancel(&wd->wheel, &e->timer);
        e->state = RLK_WD_IDLE;
        wd->stats.registered--;
    } else if (e->state == RLK_WD_FIRING || e->state == RLK_WD_CANCELLED) {
        e->state = RLK_WD_CANCELLED;
        struct timespec ts = {(time_t)(until_ms / 1000), (long)((until_ms % 1000) * 1000000)};
        while (e->state != RLK_WD_IDLE) {
            if (until_ms == 0) {
                pthread_cond_wait(&wd->done_cv, &wd->mu);
            } else if (pthread_cond_timedwait(&wd->done_cv, &wd->mu, &ts) == ETIMEDOUT &&
                       e->state != RLK_WD_IDLE) {
                assert(e->cls->release != NULL);
                e->state = RLK_WD_DETACHED;
                mine = 0;
                break;
            }
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return mine;
}

/* An entry whose batch is done leaves the watchdog (mutex held); a detached one is released. */
static void wd_settle_idle(rlk_watchdog *wd, rlk_wd_entry *e)
{
    int detached = e->state == RLK_WD_DETACHED;
    e->state = RLK_WD_IDLE;
    wd->stats.registered--;
    if (detached) {
        e->cls->release(e);
    }
}

int rlk_wd_active(rlk_watchdog *wd, const rlk_wd_entry *e)
{
    pthread_mutex_lock(&wd->mu);
    int a = e->state == RLK_WD_PENDING || e->state == RLK_WD_FIRING;
    pthread_mutex_unlock(&wd->mu);
    return a;
}

void rlk_wd_get_stats(rlk_watchdog *wd, rlk_wd_stats *out)
{
    pthread_mutex_lock(&wd->mu);
    *out = wd->stats;
    pthread_mutex_unlock(&wd->mu);
}

/* ---- one sweep --------------------------------------------------------------------------- */

typedef struct rlk_wd_item {
    rlk_wd_entry *e;
    int result; /* 1 renewed, 0 gone, -1 no answer */
    int slot;   /* a cluster client's: the slot of the entry's key, and its master's index */
    int node;
} rlk_wd_item;

typedef struct rlk_wd_chunk {
    size_t first, n; /* items[first .. first+n) */
    int retry;       /* NOSCRIPT: load and resend */
    int moved;       /* a cluster node answered MOVED: its map needs a refresh */
} rlk_wd_chunk;

static int item_cmp(const void *a, const void *b)
{
    const rlk_wd_entry *x = ((const rlk_wd_item *)a)->e, *y = ((const rlk_wd_item *)b)->e;
    if (x->cls != y->cls) {
        return (uintptr_t)x->cls < (uintptr_t)y->cls ? -1 : 1;
    }
    return x->lease_ms < y->lease_ms ? -1 : x->lease_ms > y->lease_ms;
}

/* A cluster client's order: by master (one pipeline each), then class and lease, then slot, so
 * that no batch spans two slots (a script whose keys do fails with CROSSSLOT). */
static int item_cmp_cluster(const void *a, const void *b)
{
    const rlk_wd_item *x = a, *y = b;
    if (x->node != y->node) {
        return x->node < y->node ? -1 : 1;
    }
    int c = item_cmp(a, b);
    return c != 0 ? c : (x->slot > y->slot) - (x->slot < y->slot);
}

/* Queues one batch script call for items[ch->first ..] on conn. The entries describe
 * themselves straight into two arenas (keys, fields); argv points into them. */
static int wd_append(rlock_client *c, rlk_conn *conn, rlk_wd_item *items, const rlk_wd_chunk *ch)
{
    const rlk_renew_class *cls = items[ch->first].e->cls;
    size_t n = ch->n;
    rlk_buf keys, fields;
    rlk_buf_init(&keys);
    rlk_buf_init(&fields);
    size_t end[2 * RLK_WD_BATCH];
    int r = RLOCK_OK;
    for (size_t i = 0; i < n && r == RLOCK_OK; i++) {
        r = cls->describe(items[ch->first + i].e, &keys, &fields);
        end[i] = keys.len;
        end[n + i] = fields.len;
    }
    if (r == RLOCK_OK) {
        const char *argv[2 * RLK_WD_BATCH + 1];
        size_t lens[2 * RLK_WD_BATCH + 1];
        char lease[24];
        int ln = snprintf(lease, sizeof(lease), "%lld", (long long)items[ch->first].e->lease_ms);
        for (size_t i = 0; i < n; i++) {
            size_t kb = i ? end[i - 1] : 0, fb = i ? end[n + i - 1] : 0;
            argv[i] = keys.p + kb;
            lens[i] = end[i] - kb;
            argv[n + 1 + i] = fields.p + fb;
            lens[n + 1 + i] = end[n + i] - fb;
        }
        argv[n] = lease;
        lens[n] = (size_t)ln;
        /* A sharded cluster client's variant: a fair waiter's heartbeat publishes with SPUBLISH. */
        r = rlk_script_appendv(conn, rlk_script_for(c, cls->script), (int)n, (int)(2 * n + 1), argv,
                               lens);
    }
    rlk_buf_free(&keys);
    rlk_buf_free(&fields);
    return r;
}

int rlk_wd_check_batch_item(const redisReply *rep, size_t n, size_t i)
{
    /* Any other reply (an error such as BUSY or OOM) is -1 for every entry: retried soon. */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n || i >= n) {
        return -1;
    }
    const redisReply *el = rep->element[i];
    return el->type == REDIS_REPLY_INTEGER ? (el->integer != 0 ? 1 : 0) : -1;
}

/* Reads one batch reply into the items' results. Returns RLOCK_OK, or ECONN if broken. */
static int wd_read(rlk_conn *conn, rlk_wd_item *items, rlk_wd_chunk *ch)
{
    redisReply *rep = NULL;
    int r = rlk_conn_read(conn, &rep);
    if (r != RLOCK_OK) {
        return r;
    }
    if (rep->type == REDIS_REPLY_ERROR &&
        (strncmp(rep->str, "MOVED ", 6) == 0 || strncmp(rep->str, "ASK ", 4) == 0)) {
        /* The slot moved (or is moving): the entries are retried soon, after a refresh. */
        ch->moved = 1;
    } else if (rlk_reply_is_moved(rep)) {
        /* Not the master any more: the rest of the pipeline went there too, so give up on this
         * connection and let the failover recheck find the new one. */
        r = rlk_err(RLOCK_ECONN, "renewal: %s", rep->str);
    } else if (rlk_reply_is_noscript(rep)) {
        ch->retry = 1;
    } else {
        for (size_t i = 0; i < ch->n; i++) {
            items[ch->first + i].result = rlk_wd_check_batch_item(rep, ch->n, i);
        }
    }
    freeReplyObject(rep);
    return r;
}

/* Loads, once each, the scripts of the chunks that were answered NOSCRIPT. This runs before
 * anything is appended: SCRIPT LOAD is a synchronous command and would otherwise read the
 * reply of a batch still waiting in the pipeline. */
static int wd_reload(rlock_client *c, rlk_conn *conn, rlk_wd_item *items, rlk_wd_chunk *chunks,
                     size_t nc)
{
    for (size_t i = 0; i < nc; i++) {
        int script = items[chunks[i].first].e->cls->script;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = chunks[j].retry && items[chunks[j].first].e->cls->script == script;
        }
        if (chunks[i].retry && !seen) {
            int r = rlk_script_load(conn, rlk_script_for(c, script));
            if (r != RLOCK_OK) {
                return r;
            }
        }
    }
    return RLOCK_OK;
}

/* Reads the replica sync queued behind a pipeline's batches. A renewal the replicas did not
 * acknowledge still stands on the master, so it is not judged lost: the next renewal syncs
 * again, and only a key that is gone on a node whose replicas acknowledged makes a hold lost. */
static int wd_sync_read(rlk_watchdog *wd, rlk_conn *conn, rlk_sync *s)
{
    int r = rlk_sync_read(wd->c, conn, s);
    if (r == RLOCK_OK && s->acked < s->n) {
        rlk_log(wd->c, RLOCK_LOG_WARN, "watchdog: renewals: %d of %d replicas acknowledged",
                s->acked < 0 ? 0 : s->acked, s->n);
        /* One pipeline renews many names: the event names none. */
        rlk_obs_replica_sync_failed(wd->c, -1, NULL, NULL, RLOCK_EREPLICA);
    }
    return r;
}

/* A node whose replicas did not acknowledge (or whose acknowledgement was not read) may be one
 * that lost its data and does not know yet that it was replaced (a restarted master before the
 * cluster demotes it): its "gone" is no answer. The hold is retried, and judged lost only when its
 * lease has run out unrenewed. */
static void wd_distrust_gone(rlk_wd_item *items, const rlk_wd_chunk *chunks, size_t nc)
{
    for (size_t i = 0; i < nc; i++) {
        for (size_t k = chunks[i].first; k < chunks[i].first + chunks[i].n; k++) {
            items[k].result = items[k].result == 0 ? -1 : items[k].result;
        }
    }
}

/* Sends every chunk that still needs sending in one pipeline, followed by the replica sync,
 * and reads the replies. */
static int wd_pipeline(rlk_watchdog *wd, rlk_conn *conn, rlk_wd_item *items, rlk_wd_chunk *chunks,
                       size_t nc, int only_retry)
{
    rlk_sync sync = {.n = 0};
    int r = rlk_sync_plan(wd->c, conn, &sync);
    r = r ? r : only_retry ? wd_reload(wd->c, conn, items, chunks, nc) : RLOCK_OK;
    for (size_t i = 0; i < nc && r == RLOCK_OK; i++) {
        if (!only_retry || chunks[i].retry) {
            r = wd_append(wd->c, conn, items, &chunks[i]);
            /* Put each batch on the wire at once, so Redis runs batch k while this thread builds
             * batch k+1 instead of waiting for the whole sweep to be formatted. Redis buffers
             * the replies, so writing before reading cannot deadlock. */
            int done = 0;
            r = r ? r : rlk_conn_flush(conn, &done);
        }
    }
    r = r ? r : rlk_sync_append(wd->c, conn, &sync);
    for (size_t i = 0; i < nc && r == RLOCK_OK; i++) {
        if (!only_retry || chunks[i].retry) {
            chunks[i].retry = 0;
            r = wd_read(conn, items, &chunks[i]);
        }
    }
    r = r ? r : wd_sync_read(wd, conn, &sync);
    if (sync.n > 0 && (r != RLOCK_OK || sync.acked < sync.n)) {
        wd_distrust_gone(items, chunks, nc);
    }
    return r;
}

/* Cuts items (sorted by cmp) into batches of equal items, at most RLK_WD_BATCH each. */
static rlk_wd_chunk *wd_chunk_up(rlk_wd_item *items, size_t n,
                                 int (*cmp)(const void *, const void *), size_t *nc)
{
    rlk_wd_chunk *chunks = n > 0 ? malloc(sizeof(*chunks) * n) : NULL;
    *nc = 0;
    for (size_t i = 0; chunks != NULL && i < n;) {
        size_t j = i + 1;
        while (j < n && j - i < RLK_WD_BATCH && cmp(&items[i], &items[j]) == 0) {
            j++;
        }
        chunks[(*nc)++] = (rlk_wd_chunk){.first = i, .n = j - i};
        i = j;
    }
    return chunks;
}

/* Sends chunks in one pipeline on a connection of pool (a NOSCRIPT answered loads and resends
 * once), counts it, and logs a failure. */
static int wd_send(rlk_watchdog *wd, rlk_pool *pool, rlk_wd_item *items, rlk_wd_chunk *chunks,
                   size_t nc)
{
    rlk_conn *conn = NULL;
    int r = rlk_pool_borrow(pool, &conn);
    if (r == RLOCK_OK) {
        r = wd_pipeline(wd, conn, items, chunks, nc, 0);
        int again = 0;
        for (size_t i = 0; i < nc; i++) {
            again |= chunks[i].retry;
        }
        if (r == RLOCK_OK && again) {
            r = wd_pipeline(wd, conn, items, chunks, nc, 1);
        }
        rlk_pool_return(pool, conn, r != RLOCK_OK);
    }
    pthread_mutex_lock(&wd->mu);
    wd->stats.pipelines++;
    wd->stats.batches += nc;
    wd->stats.failures += r != RLOCK_OK;
    pthread_mutex_unlock(&wd->mu);
    if (r != RLOCK_OK) {
        size_t n = 0;
        for (size_t i = 0; i < nc; i++) {
            n += chunks[i].n;
        }
        rlk_log(wd->c, RLOCK_LOG_WARN, "watchdog: renewal of %zu holds failed: %s", n,
                rlock_last_error());
    }
    return r;
}

/* A cluster client's sweep: each item's slot and master, then one pipeline per master of
 * batches that each stay within one slot. */
static void wd_renew_cluster(rlk_watchdog *wd, rlk_wd_item *items, size_t n)
{
    rlk_cluster *cl = wd->c->cluster;
    rlk_buf key, field;
    rlk_buf_init(&key);
    rlk_buf_init(&field);
    for (size_t i = 0; i < n; i++) {
        key.len = field.len = 0;
        int r = items[i].e->cls->describe(items[i].e, &key, &field);
        items[i].slot = r == RLOCK_OK ? rlk_cluster_key_slot(key.p, key.len) : 0;
        items[i].node = rlk_cluster_node_of(cl, items[i].slot);
    }
    rlk_buf_free(&key);
    rlk_buf_free(&field);
    qsort(items, n, sizeof(*items), item_cmp_cluster);
    size_t nc = 0;
    rlk_wd_chunk *chunks = wd_chunk_up(items, n, item_cmp_cluster, &nc);
    for (size_t i = 0; chunks != NULL && i < nc;) {
        size_t j = i + 1;
        while (j < nc && items[chunks[j].first].node == items[chunks[i].first].node) {
            j++;
        }
        uint64_t epoch = 0;
        rlk_pool *pool = rlk_cluster_pool(cl, items[chunks[i].first].slot, &epoch);
        int r = pool != NULL ? wd_send(wd, pool, items, chunks + i, j - i) : RLOCK_ENOMEM;
        int moved = 0;
        for (size_t k = i; k < j; k++) {
            moved |= chunks[k].moved;
        }
        if (moved) {
            (void)rlk_cluster_refresh(cl, epoch);
        } else if (r == RLOCK_ECONN) {
            (void)rlk_cluster_refresh_after_failure(cl, epoch);
        }
        i = j;
    }
    free(chunks);
}

static void wd_renew(rlk_watchdog *wd, rlk_wd_item *items, size_t n)
{
    if (wd->c->cluster != NULL) {
        wd_renew_cluster(wd, items, n);
        return;
    }
    /* Group by (class, lease). Usually every due entry has the same ones (watchdog holds with
     * the default lease), and then the sort is skipped: it was a fifth of a sweep's CPU time. */
    size_t same = 1;
    while (same < n && item_cmp(&items[0], &items[same]) == 0) {
        same++;
    }
    if (same < n) {
        qsort(items, n, sizeof(*items), item_cmp);
    }
    size_t nc = 0;
    rlk_wd_chunk *chunks = wd_chunk_up(items, n, item_cmp, &nc);
    if (chunks == NULL) {
        return; /* Results stay -1: retried at the next tick. */
    }
    if (wd_send(wd, wd->c->pool, items, chunks, nc) != RLOCK_OK) {
        rlk_sentinel_recheck(wd->c);
    }
    free(chunks);
}

/* Applies the results with the mutex held. Returns the entries judged lost, linked by next. */
static rlk_wd_entry *wd_apply(rlk_watchdog *wd, rlk_wd_item *items, size_t n, int64_t sent)
{
    rlk_wd_entry *lost = NULL;
    int64_t now = rlk_now_ms();
    for (size_t i = 0; i < n; i++) {
        rlk_wd_entry *e = items[i].e;
        if (e->state == RLK_WD_CANCELLED || e->state == RLK_WD_DETACHED) {
            wd_settle_idle(wd, e);
            continue;
        }
        if (items[i].result == 1 && e->once) {
            e->state = RLK_WD_IDLE;
            wd->stats.registered--;
            wd->stats.renewed++;
        } else if (items[i].result == 1) {
            e->expires_at = rlk_add_sat(sent, e->lease_ms);
            e->state = RLK_WD_PENDING;
            wd->stats.renewed++;
            rlk_wheel_add(&wd->wheel, &e->timer, (uint64_t)(now + wd_period(e->lease_ms)));
        } else if (items[i].result == 0 || now >= e->expires_at) {
            /* Stays FIRING until its lost() callback returned, so cancel waits for it. The
             * entry is out of the wheel, so its timer link is free to chain the lost list. */
            e->timer.next = lost ? &lost->timer : NULL;
            lost = e;
            wd->stats.lost++;
        } else {
            /* No answer: try again soon, well before the lease can run out. */
            int64_t retry = wd_period(e->lease_ms) / 3;
            retry = retry < RLK_WD_TICK_MS ? RLK_WD_TICK_MS : retry;
            e->state = RLK_WD_PENDING;
            rlk_wheel_add(&wd->wheel, &e->timer, (uint64_t)(now + retry));
        }
    }
    return lost;
}

/* Counts the sweep's renewals, one per entry sent: ok when Redis renewed it, failed when the
 * thing renewed was gone or no answer came (the entry is then retried, or judged lost). */
static void wd_count(rlk_watchdog *wd, const rlk_wd_item *items, size_t n)
{
    uint64_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        ok += items[i].result == 1;
    }
    rlk_obs_add(wd->c, RLK_CNT_RENEWALS_OK, ok);
    rlk_obs_add(wd->c, RLK_CNT_RENEWALS_FAILED, n - ok);
}

static void wd_sweep(rlk_watchdog *wd, rlk_timer *due, size_t n)
{
    rlk_wd_item *items = malloc(sizeof(*items) * n);
    size_t k = 0;
    for (rlk_timer *t = due; t != NULL;) {
        rlk_timer *next = t->next;
        rlk_wd_entry *e = RLK_ENTRY_OF(t);
        e->state = RLK_WD_FIRING;
        if (items != NULL) {
            items[k++] = (rlk_wd_item){.e = e, .result = -1};
        } else {
            /* No memory for a sweep: put the entry back and try again a tick later. */
            e->state = RLK_WD_PENDING;
            rlk_wheel_add(&wd->wheel, &e->timer, (uint64_t)(rlk_now_ms() + RLK_WD_TICK_MS));
        }
        t = next;
    }
    if (items == NULL) {
        return;
    }
    uint64_t pipelines = wd->stats.pipelines;
    pthread_mutex_unlock(&wd->mu);
    int64_t sent = rlk_now_ms();
    wd_renew(wd, items, k);
    wd_count(wd, items, k);
    pthread_mutex_lock(&wd->mu);
    pipelines = wd->stats.pipelines - pipelines;
    if (pipelines > wd->stats.sweep_pipelines_max) {
        wd->stats.sweep_pipelines_max = pipelines;
    }
    rlk_wd_entry *lost = wd_apply(wd, items, k, sent);
    free(items);
    if (lost != NULL) {
        pthread_mutex_unlock(&wd->mu);
        for (rlk_wd_entry *e = lost; e != NULL;) {
            rlk_timer *next = e->timer.next;
            e->cls->lost(e);
            e = next ? RLK_ENTRY_OF(next) : NULL;
        }
        pthread_mutex_lock(&wd->mu);
        for (rlk_wd_entry *e = lost, *next; e != NULL; e = next) {
            next = e->timer.next ? RLK_ENTRY_OF(e->timer.next) : NULL;
            e->timer.next = NULL;
            wd_settle_idle(wd, e);
        }
    }
    pthread_cond_broadcast(&wd->done_cv);
}

static void *wd_main(void *arg)
{
    rlk_watchdog *wd = arg;
    pthread_mutex_lock(&wd->mu);
    while (wd->running) {
        int64_t now = rlk_now_ms();
        rlk_timer *due = NULL;
        /* Expiring with slack coalesces renewals: holds taken over a spread of time would
         * otherwise fall due one tick apart and cost one round trip each, forever, because each
         * sweep re-adds its entries at the same time. Renewing a little early is harmless. */
        size_t n = rlk_wheel_expire(&wd->wheel, (uint64_t)(now + wd->slack_ms), &due);
        if (n > 0) {
            wd->stats.ticks++;
            wd_sweep(wd, due, n);
            continue;
        }
        uint64_t next = rlk_wheel_next_expiry(&wd->wheel);
        /* Wake when the earliest entry is due, not slack earlier: the sweep then takes
         * everything due within the slack, so sweeps are at least a slack apart. */
        wd->sleep_until = next > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)next;
        if (wd->sleep_until == INT64_MAX) {
            pthread_cond_wait(&wd->cv, &wd->mu);
        } else {
            struct timespec ts = {(time_t)(wd->sleep_until / 1000),
                                  (long)((wd->sleep_until % 1000) * 1000000)};
            pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        }
        wd->sleep_until = 0;
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

int rlk_watchdog_new(rlock_client *c, rlk_watchdog **out)
{
    rlk_watchdog *wd = calloc(1, sizeof(*wd));
    if (wd == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the watchdog");
    }
    wd->c = c;
    wd->running = 1;
    /* A tenth of the shortest renewal period in use: watchdog holds renew every
     * watchdog_timeout/3, waiter heartbeats every waiter_timeout/3. */
    int64_t shortest = c->opts.watchdog_timeout_ms < c->opts.waiter_timeout_ms
                           ? c->opts.watchdog_timeout_ms
                           : c->opts.waiter_timeout_ms;
    wd->slack_ms = shortest / 30;
    rlk_wheel_init(&wd->wheel, (uint64_t)rlk_now_ms(), RLK_WD_TICK_MS);
    pthread_mutex_init(&wd->mu, NULL);
    rlk_cond_init_monotonic(&wd->cv);
    rlk_cond_init_monotonic(&wd->done_cv);
    if (pthread_create(&wd->thread, NULL, wd_main, wd) != 0) {
        pthread_cond_destroy(&wd->cv);
        pthread_cond_destroy(&wd->done_cv);
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return rlk_err(RLOCK_ENOMEM, "cannot start the watchdog thread");
    }
    *out = wd;
    return RLOCK_OK;
}

void rlk_watchdog_free(rlk_watchdog *wd)
{
    if (wd == NULL) {
        return;
    }
    pthread_mutex_lock(&wd->mu);
    wd->running = 0;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    /* Entries still in the wheel belong to handles; they are simply forgotten here. The
     * handles see rlk_wd_active() == 0 and their cancel calls become no-ops. */
    rlk_timer *due = NULL;
    rlk_wheel_expire(&wd->wheel, UINT64_MAX, &due);
    for (rlk_timer *t = due, *next; t != NULL; t = next) {
        next = t->next;
        RLK_ENTRY_OF(t)->state = RLK_WD_IDLE;
    }
    pthread_cond_destroy(&wd->cv);
    pthread_cond_destroy(&wd->done_cv);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}

void rlk_watchdog_abandon(rlk_watchdog *wd)
{
    /* The thread does not exist in this process and the entries in the wheel are the parent's
     * (their records are forgotten by their handles): the memory is all there is to release.
     * The condition variables are not destroyed, as they may count the parent's waiters. */
    free(wd);
}

void rlk_watchdog_fork_lock(rlk_watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
}

void rlk_watchdog_fork_unlock(rlk_watchdog *wd)
{
    pthread_mutex_unlock(&wd->mu);
}
