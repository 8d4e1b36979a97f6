/*
 * The client's figures and their OpenMetrics text. Writers are the observation calls
 * (observe.c) on any thread, with relaxed atomics; the text reads each figure once, so a text
 * taken during activity is a consistent-enough snapshot, never a torn number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "metrics.h"
#include "util.h"

/* Upper bounds of the finite buckets in ns, and the same as the text's le labels. */
static const int64_t bucket_ns[RLK_HIST_BUCKETS] = {
    100000,     250000,     500000,     1000000,     2500000,     5000000,
    10000000,   25000000,   50000000,   100000000,   250000000,   500000000,
    1000000000, 2500000000, 5000000000, 10000000000, 30000000000, 60000000000};
static const char *const bucket_le[RLK_HIST_BUCKETS] = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1",    "0.25",    "0.5",    "1.0",   "2.5",    "5.0",   "10.0", "30.0",  "60.0"};
static const char *const kind_label[RLK_MK_COUNT] = {
    "reentrant",        "fair", "read", "write", "multi", "redlock", "semaphore",
    "semaphore_leased", "latch"};
static const char *const result_label[RLK_RES_COUNT] = {"ok", "timeout", "canceled", "error"};

void rlk_metrics_init(rlk_metrics *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->watch_mu, NULL);
}

void rlk_metrics_destroy(rlk_metrics *m)
{
    int n = atomic_load(&m->nwatch);
    for (int i = 0; i < n; i++) {
        free(m->watch[i]->name);
        free(m->watch[i]);
    }
    pthread_mutex_destroy(&m->watch_mu);
}

void rlk_hist_observe(rlk_hist *h, int64_t ns)
{
    if (ns < 0) {
        ns = 0;
    }
    int b = 0;
    while (b < RLK_HIST_BUCKETS && ns > bucket_ns[b]) {
        b++;
    }
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (unsigned long long)ns, memory_order_relaxed);
}

rlk_watch *rlk_metrics_find(rlk_metrics *m, const char *name)
{
    int n = atomic_load_explicit(&m->nwatch, memory_order_acquire);
    if (n == 0 || name == NULL) {
        return NULL;
    }
    size_t len = strlen(name);
    for (int i = 0; i < n; i++) {
        if (m->watch[i]->len == len && memcmp(m->watch[i]->name, name, len) == 0) {
            return m->watch[i];
        }
    }
    return NULL;
}

int rlk_metrics_watch(rlk_metrics *m, const char *name)
{
    int r = RLOCK_OK;
    pthread_mutex_lock(&m->watch_mu);
    int n = atomic_load_explicit(&m->nwatch, memory_order_relaxed);
    if (rlk_metrics_find(m, name) != NULL) {
        /* already watched */
    } else if (n >= RLK_WATCH_MAX) {
        r = rlk_err(RLOCK_EINVAL, "rlock_metrics_watch: at most %d names a client", RLK_WATCH_MAX);
    } else {
        rlk_watch *w = calloc(1, sizeof(*w));
        char *copy = strdup(name);
        if (w == NULL || copy == NULL) {
            free(w);
            free(copy);
            r = rlk_err(RLOCK_ENOMEM, "rlock_metrics_watch: cannot allocate");
        } else {
            w->name = copy;
            w->len = strlen(copy);
            m->watch[n] = w;
            atomic_store_explicit(&m->nwatch, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&m->watch_mu);
    return r;
}

/* ---- the text ---------------------------------------------------------------------------- */

/* The text being written: the buffer and the first failure (RLOCK_ENOMEM). */
typedef struct text {
    rlk_buf b;
    int err;
} text;

static void put(text *t, const char *s)
{
    if (t->err == RLOCK_OK && rlk_buf_appends(&t->b, s) != 0) {
        t->err = RLOCK_ENOMEM;
    }
}

static void family(text *t, const char *name, const char *type, const char *help)
{
    char line[256];
    snprintf(line, sizeof(line), "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
    put(t, line);
}

/* A label value with OpenMetrics' escapes (backslash, double quote, newline). */
static void put_escaped(text *t, const char *s)
{
    for (; *s != '\0'; s++) {
        char one[3] = {*s, '\0', '\0'};
        if (*s == '\\' || *s == '"' || *s == '\n') {
            one[0] = '\\';
            one[1] = *s;
            if (*s == '\n') {
                one[1] = 'n';
            }
        }
        put(t, one);
    }
}

/* One sample: metric{labels} value, where labels is "" or text ending without a comma and the
 * watched name (or NULL) goes first as name="...". */
static void sample(text *t, const char *metric, const char *wname, const char *labels,
                   const char *value)
{
    put(t, metric);
    if (wname != NULL || labels[0] != '\0') {
        put(t, "{");
        if (wname != NULL) {
            put(t, "name=\"");
            put_escaped(t, wname);
            put(t, labels[0] != '\0' ? "\"," : "\"");
        }
        put(t, labels);
        put(t, "}");
    }
    put(t, " ");
    put(t, value);
    put(t, "\n");
}

static void sample_u(text *t, const char *metric, const char *wname, const char *labels,
                     unsigned long long v)
{
    char num[32];
    rlk_fmt_u64(num, v);
    sample(t, metric, wname, labels, num);
}

static void sample_i(text *t, const char *metric, const char *wname, const char *labels,
                     long long v)
{
    char num[32];
    rlk_fmt_i64(num, v);
    sample(t, metric, wname, labels, num);
}

static void hist_samples(text *t, const char *base, const char *wname, const char *kind,
                         const rlk_hist *h)
{
    char metric[96], labels[96], num[40];
    unsigned long long cum = 0;
    snprintf(metric, sizeof(metric), "%.80s_bucket", base);
    for (int b = 0; b <= RLK_HIST_BUCKETS; b++) {
        cum += atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        snprintf(labels, sizeof(labels), "kind=\"%s\",le=\"%s\"", kind,
                 b < RLK_HIST_BUCKETS ? bucket_le[b] : "+Inf");
        sample_u(t, metric, wname, labels, cum);
    }
    snprintf(labels, sizeof(labels), "kind=\"%s\"", kind);
    snprintf(metric, sizeof(metric), "%.80s_count", base);
    sample_u(t, metric, wname, labels, cum);
    snprintf(metric, sizeof(metric), "%.80s_sum", base);
    unsigned long long ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
    snprintf(num, sizeof(num), "%llu.%09llu", ns / 1000000000ULL, ns % 1000000000ULL);
    sample(t, metric, wname, labels, num);
}

/* One set of per-kind figures: the client's (wname NULL) or a watched name's; active says which
 * kinds it writes (all for the client, those with any activity for a name). */
typedef struct figset {
    const char *wname;
    const rlk_kind_figs *f;
    int active[RLK_MK_COUNT];
} figset;

/* The per-kind families, in this order; each is written whole (every set) before the next. */
enum { FAM_ACQUIRE, FAM_WAIT, FAM_HOLD, FAM_HOLDS, FAM_WAITERS, FAM_LOST, FAM_COUNT };
static const struct {
    const char *suffix, *type, *help;
} kind_fam[FAM_COUNT] = {
    {"acquire", "counter", "Acquire calls by kind and result."},
    {"acquire_wait_seconds", "histogram", "Time spent in acquire calls."},
    {"hold_seconds", "histogram", "Time from acquisition to full release."},
    {"holds", "gauge", "Holds taken and not yet released or lost."},
    {"waiters", "gauge", "Acquire calls in progress."},
    {"lost", "counter", "Holds found gone while held."},
};

static void kind_sample(text *t, const char *metric, int fam, const figset *s, int k)
{
    char labels[96], name[96];
    const rlk_kind_figs *f = &s->f[k];
    snprintf(labels, sizeof(labels), "kind=\"%s\"", kind_label[k]);
    if (fam == FAM_ACQUIRE || fam == FAM_LOST) {
        snprintf(name, sizeof(name), "%.80s_total", metric);
    }
    if (fam == FAM_ACQUIRE) {
        for (int r = 0; r < RLK_RES_COUNT; r++) {
            snprintf(labels, sizeof(labels), "kind=\"%s\",result=\"%s\"", kind_label[k],
                     result_label[r]);
            sample_u(t, name, s->wname, labels,
                     atomic_load_explicit(&f->acquire[r], memory_order_relaxed));
        }
    } else if (fam == FAM_WAIT || fam == FAM_HOLD) {
        hist_samples(t, metric, s->wname, kind_label[k], fam == FAM_WAIT ? &f->wait : &f->hold);
    } else if (fam == FAM_LOST) {
        sample_u(t, name, s->wname, labels, atomic_load_explicit(&f->lost, memory_order_relaxed));
    } else {
        const atomic_llong *g = fam == FAM_HOLDS ? &f->holds : &f->waiters;
        sample_i(t, metric, s->wname, labels, atomic_load_explicit(g, memory_order_relaxed));
    }
}

static void kind_families(text *t, const char *prefix, const figset *sets, int nsets)
{
    char metric[96];
    for (int fam = 0; fam < FAM_COUNT; fam++) {
        snprintf(metric, sizeof(metric), "%s_%s", prefix, kind_fam[fam].suffix);
        family(t, metric, kind_fam[fam].type, kind_fam[fam].help);
        for (int i = 0; i < nsets; i++) {
            for (int k = 0; k < RLK_MK_COUNT; k++) {
                if (sets[i].active[k]) {
                    kind_sample(t, metric, fam, &sets[i], k);
                }
            }
        }
    }
}

static int figs_active(const rlk_kind_figs *f)
{
    unsigned long long any = atomic_load_explicit(&f->lost, memory_order_relaxed);
    for (int r = 0; r < RLK_RES_COUNT; r++) {
        any |= atomic_load_explicit(&f->acquire[r], memory_order_relaxed);
    }
    return any != 0 || atomic_load_explicit(&f->holds, memory_order_relaxed) != 0 ||
           atomic_load_explicit(&f->waiters, memory_order_relaxed) != 0;
}

static void counter_families(text *t, const rlk_metrics *m)
{
    static const struct {
        const char *name, *help;
        int which;
    } plain[] = {
        {"rlock_replica_sync_failures", "Writes too few replicas acknowledged in time.",
         RLK_CNT_REPLICA_SYNC_FAILURES},
        {"rlock_reconnects", "Connections dialled again after one was lost.", RLK_CNT_RECONNECTS},
        {"rlock_failovers", "Switches to another master.", RLK_CNT_FAILOVERS},
        {"rlock_redis_commands", "Commands sent to Redis.", RLK_CNT_REDIS_COMMANDS},
        {"rlock_pubsub_messages", "Pub/sub messages received.", RLK_CNT_PUBSUB_MESSAGES},
    };
    char metric[96];
    family(t, "rlock_renewals", "counter", "Watchdog renewals by result.");
    sample_u(t, "rlock_renewals_total", NULL, "result=\"ok\"",
             atomic_load_explicit(&m->counter[RLK_CNT_RENEWALS_OK], memory_order_relaxed));
    sample_u(t, "rlock_renewals_total", NULL, "result=\"failed\"",
             atomic_load_explicit(&m->counter[RLK_CNT_RENEWALS_FAILED], memory_order_relaxed));
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        family(t, plain[i].name, "counter", plain[i].help);
        snprintf(metric, sizeof(metric), "%s_total", plain[i].name);
        sample_u(t, metric, NULL, "",
                 atomic_load_explicit(&m->counter[plain[i].which], memory_order_relaxed));
    }
}

int rlk_metrics_render(rlk_metrics *m, char **out)
{
    text t = {.err = RLOCK_OK};
    rlk_buf_init(&t.b);
    figset local[1 + RLK_WATCH_MAX];
    local[0].wname = NULL;
    local[0].f = m->kind;
    for (int k = 0; k < RLK_MK_COUNT; k++) {
        local[0].active[k] = 1;
    }
    int n = atomic_load_explicit(&m->nwatch, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        local[1 + i].wname = m->watch[i]->name;
        local[1 + i].f = m->watch[i]->kind;
        for (int k = 0; k < RLK_MK_COUNT; k++) {
            local[1 + i].active[k] = figs_active(&m->watch[i]->kind[k]);
        }
    }
    kind_families(&t, "rlock", local, 1);
    counter_families(&t, m);
    kind_families(&t, "rlock_name", local + 1, n);
    put(&t, "# EOF\n");
    if (t.err != RLOCK_OK) {
        rlk_buf_free(&t.b);
        return rlk_err(RLOCK_ENOMEM, "rlock_metrics_text: out of memory");
    }
    *out = strdup(t.b.p);
    rlk_buf_free(&t.b);
    return *out != NULL ? RLOCK_OK : rlk_err(RLOCK_ENOMEM, "rlock_metrics_text: out of memory");
}
