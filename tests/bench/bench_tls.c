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

/* What one side's block needs. */
typedef struct t_sides {
    t_raw *t;
    rlock *l;
    bench_pair_cmds cmds; /* the raw side's lock "bench-u1-tls-raw" */
} t_sides;

/* The ideal's pair. */
static int t_raw_pair(void *arg)
{
    t_sides *sd = arg;
    bench_pair_cmds *p = &sd->cmds;
    return t_raw_cmd(sd->t, 7, p->acq, p->acq_len) == 1 &&
           t_raw_cmd(sd->t, 8, p->rel, p->rel_len) == 1;
}

/* A bench_block_fn. */
static double t_block(int raw, int pairs, void *arg)
{
    return bench_lock_block(raw, pairs, ((t_sides *)arg)->l, t_raw_pair, arg, "u1_tls");
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
    t_raw t;
    t_raw_open(&t);
    t_sides sd = {.t = &t, .l = rlock_open(c, RLOCK_REENTRANT, "bench-u1-tls-rlock")};
    char owner[128];
    snprintf(owner, sizeof(owner), "%s:999999", rlock_client_id(c));
    bench_pair_cmds_init(&sd.cmds, "bench-u1-tls-raw", owner);
    int pairs = (int)(200 * g_cfg.scale) + 1;
    t_block(1, pairs, &sd); /* warm-up */
    t_block(0, pairs, &sd);
    bench_abba_1t("uncontended_tls_1t", "lock+unlock pairs/s", t_block, &sd, pairs);
    t_raw_close(&t);
    rlock_free(sd.l);
    rlock_client_free(c);
    return 0;
}
