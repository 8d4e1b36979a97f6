/*
 * Scenario u1_tls: uncontended lock+unlock pairs over TLS, one thread.
 *
 * Ideal: the same two EVALSHA calls rlock sends for rlock_lock(l, 30000) + rlock_unlock(l),
 * written by hand on a blocking TLS connection (OpenSSL with the same CA, hiredis' reader for
 * the replies). rlock: the public API on a rediss:// client. Blocks of pairs alternate between
 * the two sides (ABBA), so both see the same machine load; the ratio is rlock's rate over the
 * ideal's, median over repetitions.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "bench.h"
#include "scripts.h"

typedef struct t_raw {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
    redisReader *reader;
} t_raw;

static void t_raw_open(t_raw *t)
{
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL || SSL_CTX_load_verify_locations(t->ctx, g_cfg.tls_ca, NULL) != 1) {
        bench_die("u1_tls: cannot load %s", g_cfg.tls_ca);
    }
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_cfg.tls_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(t->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        bench_die("u1_tls: cannot connect to port %d", g_cfg.tls_port);
    }
    t->ssl = SSL_new(t->ctx);
    SSL_set_fd(t->ssl, t->fd);
    SSL_set1_host(t->ssl, "127.0.0.1");
    if (SSL_connect(t->ssl) != 1) {
        bench_die("u1_tls: handshake failed");
    }
    t->reader = redisReaderCreate();
}

static void t_raw_close(t_raw *t)
{
    redisReaderFree(t->reader);
    SSL_free(t->ssl);
    close(t->fd);
    SSL_CTX_free(t->ctx);
}

/* One command, its reply's integer (the first element of an array). */
static long long t_raw_cmd(t_raw *t, int argc, const char **argv, const size_t *lens)
{
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0 || SSL_write(t->ssl, cmd, n) != n) {
        bench_die("u1_tls: write failed");
    }
    free(cmd);
    void *rep = NULL;
    char buf[16384];
    while (redisReaderGetReply(t->reader, &rep) == REDIS_OK && rep == NULL) {
        int r = SSL_read(t->ssl, buf, sizeof(buf));
        if (r <= 0) {
            bench_die("u1_tls: read failed");
        }
        redisReaderFeed(t->reader, buf, (size_t)r);
    }
    redisReply *rr = rep;
    long long v = rr == NULL                        ? -1
                  : rr->type == REDIS_REPLY_ARRAY   ? rr->element[0]->integer
                  : rr->type == REDIS_REPLY_INTEGER ? rr->integer
                                                    : -1;
    freeReplyObject(rr);
    return v;
}

/* Process CPU seconds (user + system), rlock's own threads included. */
static double t_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Runs pairs pairs on one side; returns the pairs per second and adds the CPU seconds the block
 * took to *cpu. */
static double t_block(int raw, int pairs, t_raw *t, rlock *l, const char *owner, double *cpu)
{
    const char *name = "bench-u1-tls-raw";
    char tok[128], ch[128];
    snprintf(tok, sizeof(tok), "redisson_lock_token:{%s}", name);
    snprintf(ch, sizeof(ch), "redisson_lock__channel:{%s}", name);
    const char *acq[7] = {"EVALSHA", bench_sha(RLK_SCRIPT_LOCK_ACQUIRE), "2", name, tok, "30000",
                          owner};
    const char *rel[8] = {
        "EVALSHA", bench_sha(RLK_SCRIPT_LOCK_RELEASE), "2", name, ch, "30000", owner, "0"};
    size_t al[7], rl[8];
    for (int k = 0; k < 8; k++) {
        if (k < 7) {
            al[k] = strlen(acq[k]);
        }
        rl[k] = strlen(rel[k]);
    }
    double cpu0 = t_cpu_s();
    int64_t a = bench_now_ns();
    for (int i = 0; i < pairs; i++) {
        int ok = raw ? t_raw_cmd(t, 7, acq, al) == 1 && t_raw_cmd(t, 8, rel, rl) == 1
                     : rlock_lock(l, 30000) == RLOCK_OK && rlock_unlock(l) == RLOCK_OK;
        if (!ok) {
            bench_die("u1_tls: a %s pair failed (%s)", raw ? "raw" : "rlock", rlock_last_error());
        }
    }
    double secs = (double)(bench_now_ns() - a) / 1e9;
    *cpu += t_cpu_s() - cpu0;
    return (double)pairs / secs;
}

int bench_uncontended_tls(void)
{
    if (g_cfg.tls_port == 0 || g_cfg.tls_ca == NULL) {
        fprintf(stderr, "u1_tls: skipped (no --tls-port / --tls-ca)\n");
        return -1;
    }
    redisContext *ctl = bench_raw(0);
    bench_load_scripts(ctl);
    redisFree(ctl);
    rlock_options o;
    rlock_options_init(&o);
    char url[64];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", g_cfg.tls_port);
    o.url = url;
    o.tls_ca_file = g_cfg.tls_ca;
    rlock_client *c = NULL;
    if (rlock_client_new(&o, &c) != RLOCK_OK) {
        bench_die("u1_tls: rlock_client_new: %s", rlock_last_error());
    }
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "bench-u1-tls-rlock");
    t_raw t;
    t_raw_open(&t);
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:999999", rlock_client_id(c));
    int pairs = (int)(200 * g_cfg.scale) + 1;
    double ratio[64], ideal[64], rl[64], cpu_i[64], cpu_r[64], warm = 0;
    int reps = g_cfg.reps > 64 ? 64 : g_cfg.reps;
    t_block(1, pairs, &t, l, owner, &warm); /* warm-up */
    t_block(0, pairs, &t, l, owner, &warm);
    for (int rep = 0; rep < reps; rep++) {
        double s[2] = {0, 0}, cpu[2] = {0, 0};
        for (int b = 0; b < 8; b++) {
            int raw = (b % 4 == 0 || b % 4 == 3);
            s[raw] += 1.0 / t_block(raw, pairs, &t, l, owner, &cpu[raw]);
        }
        ideal[rep] = 4.0 / s[1];
        rl[rep] = 4.0 / s[0];
        ratio[rep] = rl[rep] / ideal[rep];
        cpu_i[rep] = cpu[1] / (4.0 * pairs) * 1e6;
        cpu_r[rep] = cpu[0] / (4.0 * pairs) * 1e6;
    }
    double r = bench_median(ratio, (size_t)reps);
    bench_row_ratio("uncontended_tls_1t", "lock+unlock pairs/s", bench_median(ideal, (size_t)reps),
                    bench_median(rl, (size_t)reps), r, ">= 0.95", r >= 0.95);
    double ci = bench_median(cpu_i, (size_t)reps), cr = bench_median(cpu_r, (size_t)reps);
    bench_row("uncontended_tls_1t", "client CPU per pair (us)", ci, cr, NULL, -1);
    bench_json j;
    bench_json_begin(&j, "uncontended_tls_1t");
    bench_json_num(&j, "reps", reps);
    bench_json_num(&j, "ideal_pairs_per_s", bench_median(ideal, (size_t)reps));
    bench_json_num(&j, "rlock_pairs_per_s", bench_median(rl, (size_t)reps));
    bench_json_num(&j, "ratio", r);
    bench_json_num(&j, "ideal_client_cpu_us_per_pair", ci);
    bench_json_num(&j, "rlock_client_cpu_us_per_pair", cr);
    bench_json_num(&j, "target_ratio", 0.95);
    bench_json_bool(&j, "pass", r >= 0.95);
    bench_json_end(&j);
    t_raw_close(&t);
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}
