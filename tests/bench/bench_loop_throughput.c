/*
 * Scenario loop_throughput: uncontended lock+unlock pairs with 64 in flight on one libuv loop (64
 * owners on 64 names, each locking again as soon as its unlock's done ran), against the ideal:
 * hiredis' redisAsyncContext on the same loop (hiredis' adapters/libuv.h) sending the same two
 * EVALSHAs per pair, 64 chains in flight. The ideal's commands are the loop client's own,
 * captured with MONITOR during a warm-up round, so the bytes are the same. Blocks of a fixed
 * time (80 ms x scale) alternate ABBA in 9 groups; the row is the median over the groups of
 * rlock's pairs per second over the ideal's (goal >= 0.90). Short blocks close in time see the
 * same load from the rest of the machine: longer ones moved the ratio by +-0.2.
 */
#include <adapters/libuv.h>
#include <async.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "bench_loop.h"

#define T_CHAINS 64
#define T_ARGS   16
#define T_GROUPS 9 /* ABBA groups of blocks; the row is the median of their ratios */

/* One captured command: argv as MONITOR showed it. */
typedef struct t_cmd {
    int argc;
    char *argv[T_ARGS];
    size_t len[T_ARGS];
} t_cmd;

typedef struct t_state t_state;

typedef struct t_chain {
    t_state *s;
    int i;
} t_chain;

struct t_state {
    bench_uv loop;
    rlock_client *c;
    redisAsyncContext *ac;
    rlock *lock[T_CHAINS];
    rlock_owner *owner[T_CHAINS];
    t_cmd acq[T_CHAINS], rel[T_CHAINS];
    t_chain chain[T_CHAINS];
    int64_t deadline;
    int running, errors, rounds;
    long pairs;
    double cpu_us[2], npairs[2]; /* per side (1: the ideal): process CPU and pairs, all blocks */
};

/* Parses MONITOR's quoted arguments (sdscatrepr's escapes) into cmd; 0 on success. */
static int t_parse(const char *line, t_cmd *cmd)
{
    const char *p = strchr(line, '"');
    cmd->argc = 0;
    while (p != NULL && *p == '"' && cmd->argc < T_ARGS) {
        char *out = malloc(strlen(p) + 1);
        size_t n = 0;
        for (p++; *p != '\0' && *p != '"'; p++) {
            if (*p != '\\') {
                out[n++] = *p;
                continue;
            }
            p++;
            static const char from[] = "nrtab", to[] = "\n\r\t\a\b";
            const char *e = *p != '\0' ? strchr(from, *p) : NULL;
            if (*p == 'x' && p[1] != '\0' && p[2] != '\0') {
                char hex[3] = {p[1], p[2], 0};
                out[n++] = (char)strtol(hex, NULL, 16);
                p += 2;
            } else {
                out[n++] = e != NULL ? to[e - from] : *p;
            }
        }
        out[n] = '\0';
        cmd->argv[cmd->argc] = out;
        cmd->len[cmd->argc++] = n;
        p = *p == '"' ? p + 1 : p;
        p = *p == ' ' ? p + 1 : NULL;
    }
    return cmd->argc >= 4 ? 0 : -1;
}

static void t_cmd_free(t_cmd *cmd)
{
    for (int k = 0; k < cmd->argc; k++) {
        free(cmd->argv[k]);
    }
    cmd->argc = 0;
}

/* ---- rlock's side: lock, on done unlock, on done again until the deadline ---------------- */

static void t_lock(t_chain *ch);

static void t_unlocked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    t_chain *ch = arg;
    ch->s->errors += rc != RLOCK_OK;
    ch->s->pairs++;
    if (rc == RLOCK_OK && bench_now_ns() < ch->s->deadline) {
        t_lock(ch);
    } else {
        ch->s->running--;
    }
}

static void t_locked(rlock *lock, int rc, void *arg)
{
    t_chain *ch = arg;
    if (rc != RLOCK_OK || rlock_unlock_async(lock, ch->s->owner[ch->i], t_unlocked, ch) != 0) {
        ch->s->errors++;
        ch->s->running--;
    }
}

static void t_lock(t_chain *ch)
{
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = ch->s->owner[ch->i];
    a.lease_ms = 30000;
    if (rlock_lock_async(ch->s->lock[ch->i], &a, t_locked, ch) != RLOCK_OK) {
        ch->s->errors++;
        ch->s->running--;
    }
}

/* ---- the ideal: the same two EVALSHAs per pair on a redisAsyncContext --------------------- */

static void t_raw_acq(t_chain *ch);

static int t_raw_bad(redisReply *r)
{
    return r == NULL || r->type == REDIS_REPLY_ERROR;
}

static void t_raw_released(redisAsyncContext *ac, void *reply, void *arg)
{
    (void)ac;
    t_chain *ch = arg;
    int bad = t_raw_bad(reply);
    ch->s->errors += bad;
    ch->s->pairs++;
    if (!bad && bench_now_ns() < ch->s->deadline) {
        t_raw_acq(ch);
    } else {
        ch->s->running--;
    }
}

static void t_raw_acquired(redisAsyncContext *ac, void *reply, void *arg)
{
    t_chain *ch = arg;
    const t_cmd *c = &ch->s->rel[ch->i];
    if (t_raw_bad(reply) || redisAsyncCommandArgv(ac, t_raw_released, ch, c->argc,
                                                  (const char **)c->argv, c->len) != REDIS_OK) {
        ch->s->errors++;
        ch->s->running--;
    }
}

static void t_raw_acq(t_chain *ch)
{
    const t_cmd *c = &ch->s->acq[ch->i];
    if (redisAsyncCommandArgv(ch->s->ac, t_raw_acquired, ch, c->argc, (const char **)c->argv,
                              c->len) != REDIS_OK) {
        ch->s->errors++;
        ch->s->running--;
    }
}

static double t_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* One block of ms on one side (raw 1: the ideal); pairs per second. */
static double t_block(t_state *s, int raw, int64_t ms)
{
    s->pairs = 0;
    s->errors = 0;
    s->running = T_CHAINS;
    int64_t t0 = bench_now_ns();
    double cpu0 = t_cpu_us();
    s->deadline = t0 + ms * 1000000;
    for (int i = 0; i < T_CHAINS; i++) {
        if (raw) {
            t_raw_acq(&s->chain[i]);
        } else {
            t_lock(&s->chain[i]);
        }
    }
    int zero = 0;
    while (s->running > 0) {
        (void)uv_run(&s->loop.uv, UV_RUN_ONCE);
        zero += s->running < 0; /* never: a chain ended twice */
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    s->cpu_us[raw] += t_cpu_us() - cpu0;
    s->npairs[raw] += (double)s->pairs;
    if (s->errors != 0 || zero != 0) {
        bench_die("loop_throughput: %d failed pairs (%s side): %s", s->errors,
                  raw ? "ideal" : "rlock", raw ? "" : rlock_last_error());
    }
    return (double)s->pairs / secs;
}

/* ---- setup: the loop client's commands, captured ------------------------------------------ */

/* Files one MONITOR line: an EVALSHA on chain i's name is its lock (even count) or its unlock
 * (odd); the last of each is kept. Returns 1 when it was one of ours. */
static int t_file(t_state *s, const char *line, int *seen)
{
    t_cmd c;
    if (t_parse(line, &c) != 0 || strcasecmp(c.argv[0], "EVALSHA") != 0 ||
        strncmp(c.argv[3], "bench_lt:", 9) != 0) {
        t_cmd_free(&c);
        return 0;
    }
    int i = atoi(c.argv[3] + 9);
    if (i < 0 || i >= T_CHAINS) {
        bench_die("loop_throughput: a stray name in MONITOR: %s", c.argv[3]);
    }
    t_cmd *slot = seen[i]++ % 2 == 0 ? &s->acq[i] : &s->rel[i];
    t_cmd_free(slot);
    *slot = c;
    return 1;
}

/* Two warm-up rounds of one pair per chain through the loop client under MONITOR. */
static void t_capture(t_state *s)
{
    redisContext *m = bench_raw(0);
    bench_load_scripts(m);
    bench_cmd_ok(m, "MONITOR");
    int want = 0;
    for (int round = 0; round < 2; round++, want += 2 * T_CHAINS) {
        (void)t_block(s, 0, 0);
    }
    struct timeval tv = {5, 0};
    redisSetTimeout(m, tv);
    int seen[T_CHAINS] = {0};
    for (int got = 0; got < want;) {
        redisReply *r = NULL;
        if (redisGetReply(m, (void **)&r) != REDIS_OK || r == NULL) {
            bench_die("loop_throughput: MONITOR: %s", m->errstr);
        }
        if (r->type == REDIS_REPLY_STATUS) {
            got += t_file(s, r->str, seen);
        }
        freeReplyObject(r);
    }
    redisFree(m);
}

static void t_open(t_state *s)
{
    bench_uv_init(&s->loop);
    s->c = bench_uv_client(&s->loop, 0);
    for (int i = 0; i < T_CHAINS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bench_lt:%d", i);
        s->chain[i] = (t_chain){.s = s, .i = i};
        s->lock[i] = rlock_open(s->c, RLOCK_REENTRANT, name);
        if (s->lock[i] == NULL || rlock_owner_new(s->c, &s->owner[i]) != RLOCK_OK) {
            bench_die("loop_throughput: %s", rlock_last_error());
        }
    }
    t_capture(s);
    s->ac = redisAsyncConnect("127.0.0.1", g_cfg.ports[0]);
    if (s->ac == NULL || s->ac->err || redisLibuvAttach(s->ac, &s->loop.uv) != REDIS_OK) {
        bench_die("loop_throughput: redisAsyncConnect failed");
    }
}

static void t_close(t_state *s)
{
    redisAsyncFree(s->ac);
    for (int i = 0; i < T_CHAINS; i++) {
        rlock_free(s->lock[i]);
        rlock_owner_free(s->owner[i]);
        t_cmd_free(&s->acq[i]);
        t_cmd_free(&s->rel[i]);
    }
    bench_uv_client_free(&s->loop, s->c);
    bench_uv_close(&s->loop);
}

int bench_loop_throughput(void)
{
    static t_state s;
    memset(&s, 0, sizeof(s));
    t_open(&s);
    int64_t ms = (int64_t)(80 * g_cfg.scale);
    ms = ms < 20 ? 20 : ms;
    (void)t_block(&s, 1, ms / 2); /* the ideal's connection up, both warm */
    s.cpu_us[1] = s.npairs[1] = 0;
    double ratio[T_GROUPS], ideal[T_GROUPS], rl[T_GROUPS];
    for (int g = 0; g < T_GROUPS; g++) {
        double sum[2] = {0, 0};
        for (int b = 0; b < 4; b++) { /* ABBA: both sides see the same load */
            int raw = b == 0 || b == 3;
            sum[raw] += 1.0 / t_block(&s, raw, ms); /* harmonic mean of the blocks' rates */
        }
        ideal[g] = 2.0 / sum[1];
        rl[g] = 2.0 / sum[0];
        ratio[g] = rl[g] / ideal[g];
    }
    t_close(&s);
    double r = bench_median(ratio, T_GROUPS), mi = bench_median(ideal, T_GROUPS);
    double mr = bench_median(rl, T_GROUPS);
    bench_row_ratio("loop_throughput", "pairs/s, 64 in flight", mi, mr, r, ">= 0.90", r >= 0.90);
    double ci = s.cpu_us[1] / s.npairs[1], cr = s.cpu_us[0] / s.npairs[0];
    bench_row("loop_throughput", "client CPU per pair (us)", ci, cr, NULL, -1);
    bench_json j;
    bench_json_begin(&j, "loop_throughput");
    BENCH_JSON_NUMS(&j, {"in_flight", T_CHAINS}, {"block_ms", (double)ms},
                    {"ideal_pairs_per_s", mi}, {"rlock_pairs_per_s", mr}, {"ratio", r},
                    {"ideal_cpu_us_per_pair", ci}, {"rlock_cpu_us_per_pair", cr});
    bench_json_end(&j);
    return 0;
}
