/*
 * rlock_bench helpers: clocks, raw connections, INFO commandstats, percentiles, table and JSON.
 */
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "scripts.h"

bench_cfg g_cfg = {.ports = {0}, .nports = 0, .reps = 5, .scale = 1.0};

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rlock_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

redisContext *bench_raw(int idx)
{
    if (idx >= g_cfg.nports) {
        bench_die("no server #%d (give --port %d times)", idx, idx + 1);
    }
    redisContext *c = redisConnect("127.0.0.1", g_cfg.ports[idx]);
    if (c == NULL || c->err) {
        bench_die("connect to port %d: %s", g_cfg.ports[idx], c ? c->errstr : "no memory");
    }
    return c;
}

redisReply *bench_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        bench_die("command '%s': %s", fmt, c->errstr);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        bench_die("command '%s': %s", fmt, r->str);
    }
    return r;
}

void bench_cmd_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        bench_die("command '%s': %s", fmt, r ? r->str : c->errstr);
    }
    freeReplyObject(r);
}

int bench_sub_read(redisContext *c, int timeout_ms)
{
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
            bench_die("subscriber: protocol error");
        }
        if (rep != NULL) {
            freeReplyObject(rep);
            return 1;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) == 0) {
            return 0;
        }
        if (redisBufferRead(c) != REDIS_OK) {
            bench_die("subscriber: %s", c->errstr);
        }
    }
}

void bench_load_scripts(redisContext *c)
{
    for (int i = 0; i < RLK_SCRIPT__COUNT; i++) {
        const rlk_script_src *s = rlk_script_get(i);
        redisReply *r = bench_cmd(c, "SCRIPT LOAD %b", s->body, s->len);
        if (r->type != REDIS_REPLY_STRING || strcmp(r->str, s->sha1) != 0) {
            bench_die("SCRIPT LOAD %s: SHA mismatch", s->name);
        }
        freeReplyObject(r);
    }
}

const char *bench_sha(int script)
{
    return rlk_script_get(script)->sha1;
}

rlock_client *bench_client_opts(int idx, rlock_options *o)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", g_cfg.ports[idx]);
    o->url = url;
    rlock_client *cl = NULL;
    int r = rlock_client_new(o, &cl);
    if (r != RLOCK_OK) {
        bench_die("rlock_client_new: %s: %s", rlock_strerror(r), rlock_last_error());
    }
    return cl;
}

rlock_client *bench_client(int idx, int64_t watchdog_ms, int64_t command_timeout_ms)
{
    rlock_options o;
    rlock_options_init(&o);
    if (watchdog_ms > 0) {
        o.watchdog_timeout_ms = watchdog_ms;
    }
    if (command_timeout_ms > 0) {
        o.command_timeout_ms = command_timeout_ms;
    }
    return bench_client_opts(idx, &o);
}

void bench_cmdstats_get(redisContext *c, bench_cmdstats *out)
{
    memset(out, 0, sizeof(*out));
    redisReply *r = bench_cmd(c, "INFO commandstats");
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\r\n", &save); line != NULL;
         line = strtok_r(NULL, "\r\n", &save)) {
        char name[48];
        unsigned long long calls = 0, usec = 0;
        if (sscanf(line, "cmdstat_%47[^:]:calls=%llu,usec=%llu", name, &calls, &usec) != 3) {
            continue;
        }
        if (strcmp(name, "info") == 0 || strcmp(name, "config|resetstat") == 0 ||
            out->n == BENCH_MAX_CMDS) {
            continue;
        }
        snprintf(out->name[out->n], sizeof(out->name[0]), "%s", name);
        out->calls[out->n] = calls;
        out->usec[out->n] = usec;
        out->n++;
    }
    freeReplyObject(r);
}

uint64_t bench_cmdstats_calls(const bench_cmdstats *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->name[i], name) == 0) {
            return s->calls[i];
        }
    }
    return 0;
}

uint64_t bench_cmdstats_usec(const bench_cmdstats *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->name[i], name) == 0) {
            return s->usec[i];
        }
    }
    return 0;
}

static uint64_t bench_absdiff(uint64_t x, uint64_t y)
{
    return x > y ? x - y : y - x;
}

uint64_t bench_cmdstats_diff(const bench_cmdstats *a, const bench_cmdstats *b, const char *skip)
{
    uint64_t d = 0;
    for (int i = 0; i < a->n; i++) {
        if (skip == NULL || strcmp(a->name[i], skip) != 0) {
            d += bench_absdiff(a->calls[i], bench_cmdstats_calls(b, a->name[i]));
        }
    }
    for (int i = 0; i < b->n; i++) {
        if ((skip == NULL || strcmp(b->name[i], skip) != 0) &&
            bench_cmdstats_calls(a, b->name[i]) == 0) {
            d += b->calls[i];
        }
    }
    return d;
}

void bench_samples_add(bench_samples *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof(double));
        if (s->v == NULL) {
            bench_die("out of memory");
        }
    }
    s->v[s->n++] = x;
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int bench_dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_pct(bench_samples *s, double p)
{
    if (s->n == 0) {
        return NAN;
    }
    qsort(s->v, s->n, sizeof(double), bench_dcmp);
    size_t rank = (size_t)ceil(p / 100.0 * (double)s->n);
    rank = rank == 0 ? 1 : rank;
    return s->v[rank > s->n ? s->n - 1 : rank - 1];
}

double bench_median(const double *v, size_t n)
{
    if (n == 0) {
        return NAN;
    }
    double *t = malloc(n * sizeof(double));
    if (t == NULL) {
        bench_die("out of memory");
    }
    memcpy(t, v, n * sizeof(double));
    qsort(t, n, sizeof(double), bench_dcmp);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return m;
}

void bench_table_header(void)
{
    printf("%-22s %-30s %14s %14s %7s  %-22s %s\n", "scenario", "metric", "ideal", "rlock", "ratio",
           "target", "result");
    fflush(stdout);
}

static void bench_fmt(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "-");
    } else if (fabs(v) >= 1000) {
        snprintf(buf, n, "%.0f", v);
    } else {
        snprintf(buf, n, "%.3g", v);
    }
}

void bench_row(const char *scenario, const char *metric, double ideal, double rlock,
               const char *target, int pass)
{
    double ratio = isnan(ideal) || isnan(rlock) || ideal == 0 ? NAN : rlock / ideal;
    bench_row_ratio(scenario, metric, ideal, rlock, ratio, target, pass);
}

void bench_row_ratio(const char *scenario, const char *metric, double ideal, double rlock,
                     double rv, const char *target, int pass)
{
    char a[32], b[32], ratio[32];
    bench_fmt(a, sizeof(a), ideal);
    bench_fmt(b, sizeof(b), rlock);
    if (isnan(rv)) {
        snprintf(ratio, sizeof(ratio), "-");
    } else {
        snprintf(ratio, sizeof(ratio), "%.3f", rv);
    }
    printf("%-22s %-30s %14s %14s %7s  %-22s %s\n", scenario, metric, a, b, ratio,
           target ? target : "", pass < 0 ? "" : (pass ? "PASS" : "MISS"));
    fflush(stdout);
}

#define BENCH_MAX_JSON 32
static char *g_json[BENCH_MAX_JSON];
static int g_njson;

void bench_json_begin(bench_json *j, const char *scenario)
{
    j->len = (size_t)snprintf(j->buf, sizeof(j->buf), "{\"scenario\":\"%s\"", scenario);
}

static void bench_json_put(bench_json *j, const char *fmt, ...)
{
    if (j->len >= sizeof(j->buf)) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
    va_end(ap);
    j->len += n > 0 ? (size_t)n : 0;
}

void bench_json_num(bench_json *j, const char *key, double v)
{
    if (isnan(v) || isinf(v)) {
        bench_json_put(j, ",\"%s\":null", key);
    } else if (v == floor(v) && fabs(v) < 1e15) {
        bench_json_put(j, ",\"%s\":%.0f", key, v);
    } else {
        bench_json_put(j, ",\"%s\":%.4g", key, v);
    }
}

void bench_json_nums(bench_json *j, const bench_num *nums, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bench_json_num(j, nums[i].key, nums[i].v);
    }
}

void bench_json_str(bench_json *j, const char *key, const char *v)
{
    bench_json_put(j, ",\"%s\":\"%s\"", key, v);
}

void bench_json_bool(bench_json *j, const char *key, int v)
{
    bench_json_put(j, ",\"%s\":%s", key, v ? "true" : "false");
}

void bench_json_end(bench_json *j)
{
    bench_json_put(j, "}");
    if (g_njson < BENCH_MAX_JSON) {
        g_json[g_njson++] = strdup(j->buf);
    }
}

void bench_print_json_lines(void)
{
    for (int i = 0; i < g_njson; i++) {
        printf("%s\n", g_json[i]);
        free(g_json[i]);
    }
    fflush(stdout);
}

void bench_pair_cmds_init(bench_pair_cmds *p, const char *name, const char *owner)
{
    snprintf(p->tok, sizeof(p->tok), "redisson_lock_token:{%s}", name);
    snprintf(p->ch, sizeof(p->ch), "redisson_lock__channel:{%s}", name);
    const char *acq[7] = {"EVALSHA", bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), "2", name, p->tok, "30000",
                          owner};
    const char *rel[8] = {
        "EVALSHA", bench_sha(RLK_SCRIPT_LOCK_RELEASE), "2", name, p->ch, "30000", owner, "0"};
    for (int k = 0; k < 8; k++) {
        if (k < 7) {
            p->acq[k] = acq[k];
            p->acq_len[k] = strlen(acq[k]);
        }
        p->rel[k] = rel[k];
        p->rel_len[k] = strlen(rel[k]);
    }
}

void bench_abba_1t(const char *scenario, const char *metric, bench_block_fn fn, void *arg,
                   int pairs)
{
    double ratio[64], ideal[64], rl[64];
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    for (int rep = 0; rep < reps; rep++) {
        double s[2] = {0, 0};
        for (int b = 0; b < 8; b++) {
            int raw = (b % 4 == 0 || b % 4 == 3);
            s[raw] += 1.0 / fn(raw, pairs, arg);
        }
        ideal[rep] = 4.0 / s[1];
        rl[rep] = 4.0 / s[0];
        ratio[rep] = rl[rep] / ideal[rep];
    }
    double r = bench_median(ratio, (size_t)reps);
    bench_row_ratio(scenario, metric, bench_median(ideal, (size_t)reps),
                    bench_median(rl, (size_t)reps), r, ">= 0.95", r >= 0.95);
    bench_json j;
    bench_json_begin(&j, scenario);
    bench_json_num(&j, "reps", reps);
    bench_json_num(&j, "ideal_pairs_per_s", bench_median(ideal, (size_t)reps));
    bench_json_num(&j, "rlock_pairs_per_s", bench_median(rl, (size_t)reps));
    bench_json_num(&j, "ratio", r);
    bench_json_num(&j, "target_ratio", 0.95);
    bench_json_bool(&j, "pass", r >= 0.95);
    bench_json_end(&j);
}

double bench_lock_block(int raw, int pairs, rlock *l, int (*raw_pair)(void *arg), void *arg,
                        const char *what)
{
    int64_t a = bench_now_ns();
    for (int i = 0; i < pairs; i++) {
        int ok =
            raw ? raw_pair(arg) : rlock_lock(l, 30000) == RLOCK_OK && rlock_unlock(l) == RLOCK_OK;
        if (!ok) {
            bench_die("%s: a %s pair failed (%s)", what, raw ? "raw" : "rlock", rlock_last_error());
        }
    }
    return (double)pairs / ((double)(bench_now_ns() - a) / 1e9);
}

redisReply *bench_eval(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (g_cfg.sync_n == 0) {
        redisReply *r = redisvCommand(c, fmt, ap);
        va_end(ap);
        return r;
    }
    int rc = redisvAppendCommand(c, fmt, ap);
    va_end(ap);
    redisReply *r = NULL, *w = NULL;
    if (rc != REDIS_OK || redisAppendCommand(c, "WAIT %d 1000", g_cfg.sync_n) != REDIS_OK ||
        redisGetReply(c, (void **)&r) != REDIS_OK || redisGetReply(c, (void **)&w) != REDIS_OK) {
        freeReplyObject(r);
        return NULL;
    }
    if (w->type != REDIS_REPLY_INTEGER || w->integer < g_cfg.sync_n) {
        bench_die("WAIT %d: %lld replicas acknowledged", g_cfg.sync_n,
                  w->type == REDIS_REPLY_INTEGER ? w->integer : -1);
    }
    freeReplyObject(w);
    return r;
}

int bench_on_sync_master(int (*fn)(void), const char *scen)
{
    if (g_cfg.sync_port == 0) {
        fprintf(stderr, "%s: skipped (no --sync-port)\n", scen);
        return -1;
    }
    int saved = g_cfg.ports[0];
    g_cfg.ports[0] = g_cfg.sync_port;
    g_cfg.sync_n = 2;
    int r = fn();
    g_cfg.sync_n = 0;
    g_cfg.ports[0] = saved;
    return r;
}

double bench_wait_round_us(void)
{
    redisContext *c = bench_raw(0);
    bench_samples alone = {0}, waited = {0};
    for (int i = 0; i < 400; i++) {
        int64_t a = bench_now_ns();
        freeReplyObject(bench_cmd(c, "SET bench:wait-probe %d", i));
        int64_t b = bench_now_ns();
        bench_sleep_us(1000);
        int64_t d = bench_now_ns();
        redisReply *r = bench_eval(c, "SET bench:wait-probe %d", i);
        int64_t e = bench_now_ns();
        freeReplyObject(r);
        bench_samples_add(&alone, (double)(b - a) / 1000.0);
        bench_samples_add(&waited, (double)(e - d) / 1000.0);
        bench_sleep_us(1000);
    }
    double round = bench_pct(&waited, 50) - bench_pct(&alone, 50);
    bench_samples_free(&alone);
    bench_samples_free(&waited);
    redisFree(c);
    return round;
}
