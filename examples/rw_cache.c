/*
 * rw_cache - a cache in Redis protected by rlock's read-write lock.
 *
 * Usage: rw_cache [REDIS_URL] [READERS [SECONDS]]
 *   REDIS_URL  the server to use, "redis://host:port" (default: $REDIS_URL, else
 *              redis://127.0.0.1:6379; this program starts nothing itself, for example:
 *              redis-server --port 7777 --save '' & rw_cache redis://127.0.0.1:7777)
 *   READERS    reader processes (default 4), SECONDS run time (default 5)
 *
 * The cached value is two keys, rw_cache:value:a and rw_cache:value:b, that must always be equal.
 * One writer process refreshes them in two separate steps (SET a, pause, SET b) under the write
 * lock, using the write grant's fencing token as the new version. READERS reader processes read
 * both keys under the read lock, pausing between the two GETs, and count "torn" reads where the
 * two differ. Readers also count themselves in and out of rw_cache:readers_inside, so the program
 * can report how many reads ran at the same time.
 *
 * Without the lock a reader would regularly see a half-written value; with it, none does, while
 * reads still overlap each other. Prints the totals and exits 0 if no read was torn and reads did
 * run concurrently, 1 otherwise.
 *
 * The program uses rlock for locking only; its own cache reads and writes go over a minimal RESP
 * connection (below) so that it needs nothing but the rlock library.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define LOCK_NAME "rw_cache:lock"

/* ---- a minimal Redis connection ------------------------------------------------------------ */

typedef struct kv {
    int fd;
    char buf[4096];
    size_t len, pos;
} kv;

static int kv_connect(kv *c, const char *url)
{
    char host[256] = "127.0.0.1";
    char port[16] = "6379";
    const char *p = strncmp(url, "redis://", 8) == 0 ? url + 8 : url;
    const char *colon = strchr(p, ':');
    struct addrinfo hints = {0}, *ai = NULL;

    if (colon != NULL && (size_t)(colon - p) < sizeof(host)) {
        memcpy(host, p, (size_t)(colon - p));
        host[colon - p] = '\0';
        snprintf(port, sizeof(port), "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
    }
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        return -1;
    }
    c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    c->len = c->pos = 0;
    return 0;
}

/* Reads one line (without CRLF) into out. */
static int kv_line(kv *c, char *out, size_t cap)
{
    size_t n = 0;

    for (;;) {
        if (c->pos == c->len) {
            ssize_t got = read(c->fd, c->buf, sizeof(c->buf));
            if (got <= 0) {
                return -1;
            }
            c->len = (size_t)got;
            c->pos = 0;
        }
        char ch = c->buf[c->pos++];
        if (ch == '\n') {
            if (n > 0 && out[n - 1] == '\r') {
                n--;
            }
            out[n] = '\0';
            return 0;
        }
        if (n + 1 < cap) {
            out[n++] = ch;
        }
    }
}

/* Sends a command (argv strings) and returns the reply's text in out: the integer, the string
 * ("" for nil) or the status. Returns 0, or -1 on an I/O or error reply. */
static int kv_cmd(kv *c, char *out, size_t cap, int argc, const char **argv)
{
    char req[1024];
    int n = snprintf(req, sizeof(req), "*%d\r\n", argc);
    char line[512];

    for (int i = 0; i < argc && n < (int)sizeof(req); i++) {
        n += snprintf(req + n, sizeof(req) - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    }
    if (n >= (int)sizeof(req) || write(c->fd, req, (size_t)n) != n ||
        kv_line(c, line, sizeof(line)) != 0) {
        return -1;
    }
    out[0] = '\0';
    if (line[0] == '$') {
        if ((int)strtol(line + 1, NULL, 10) >= 0 && kv_line(c, out, cap) != 0) {
            return -1;
        }
        return 0;
    }
    size_t len = strlen(line + 1);
    if (len >= cap) {
        len = cap - 1;
    }
    memcpy(out, line + 1, len);
    out[len] = '\0';
    return line[0] == '-' ? -1 : 0;
}

static long long kv_int(kv *c, const char *a0, const char *a1)
{
    char out[64];
    const char *argv[] = {a0, a1};

    return kv_cmd(c, out, sizeof(out), 2, argv) == 0 ? strtoll(out, NULL, 10) : -1;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the two roles --------------------------------------------------------------------------- */

typedef struct result {
    long ops, torn, max_inside, errors;
} result;

static void reader(const char *url, double seconds, result *res)
{
    rlock_options o;
    rlock_client *client = NULL;
    rlock *rd;
    kv c;
    char a[64], b[64];
    const char *get_a[] = {"GET", "rw_cache:value:a"};
    const char *get_b[] = {"GET", "rw_cache:value:b"};
    double end = now_s() + seconds;

    rlock_options_init(&o);
    o.url = url;
    if (rlock_client_new(&o, &client) != RLOCK_OK || kv_connect(&c, url) != 0) {
        fprintf(stderr, "reader: cannot connect: %s\n", rlock_last_error());
        res->errors++;
        return;
    }
    rd = rlock_open(client, RLOCK_READ, LOCK_NAME);
    while (rd != NULL && now_s() < end) {
        if (rlock_lock(rd, -1) != RLOCK_OK) {
            res->errors++;
            continue;
        }
        long long inside = kv_int(&c, "INCR", "rw_cache:readers_inside");
        if (inside > res->max_inside) {
            res->max_inside = inside;
        }
        kv_cmd(&c, a, sizeof(a), 2, get_a);
        pause_ms(1); /* widen the window in which a writer could interfere */
        kv_cmd(&c, b, sizeof(b), 2, get_b);
        if (strcmp(a, b) != 0) {
            res->torn++;
        }
        kv_int(&c, "DECR", "rw_cache:readers_inside");
        if (rlock_unlock(rd) != RLOCK_OK) {
            res->errors++;
        }
        res->ops++;
    }
    rlock_free(rd);
    rlock_client_free(client);
    close(c.fd);
}

static void writer(const char *url, double seconds, result *res)
{
    rlock_options o;
    rlock_client *client = NULL;
    rlock *wr;
    kv c;
    char out[64], version[32];
    double end = now_s() + seconds;

    rlock_options_init(&o);
    o.url = url;
    if (rlock_client_new(&o, &client) != RLOCK_OK || kv_connect(&c, url) != 0) {
        fprintf(stderr, "writer: cannot connect: %s\n", rlock_last_error());
        res->errors++;
        return;
    }
    wr = rlock_open(client, RLOCK_WRITE, LOCK_NAME);
    while (wr != NULL && now_s() < end) {
        if (rlock_lock(wr, -1) != RLOCK_OK) {
            res->errors++;
            continue;
        }
        /* The fencing token of the write grant is a ready-made, strictly increasing version. */
        snprintf(version, sizeof(version), "v%llu", (unsigned long long)rlock_token(wr));
        const char *set_a[] = {"SET", "rw_cache:value:a", version};
        const char *set_b[] = {"SET", "rw_cache:value:b", version};
        kv_cmd(&c, out, sizeof(out), 3, set_a);
        pause_ms(2); /* the half-written state that readers must never see */
        kv_cmd(&c, out, sizeof(out), 3, set_b);
        if (rlock_unlock(wr) != RLOCK_OK) {
            res->errors++;
        }
        res->ops++;
        pause_ms(20);
    }
    rlock_free(wr);
    rlock_client_free(client);
    close(c.fd);
}

/* Runs role in a child process that sends its result back through a pipe. */
static pid_t spawn(int is_writer, const char *url, double seconds, int *fd_out)
{
    int fds[2];
    pid_t pid;

    if (pipe(fds) != 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        result res = {0};
        close(fds[0]);
        if (is_writer) {
            writer(url, seconds, &res);
        } else {
            reader(url, seconds, &res);
        }
        _exit(write(fds[1], &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
    }
    close(fds[1]);
    *fd_out = fds[0];
    return pid;
}

/* The server: the URL argument when there is one, else $REDIS_URL, else a local server. */
static const char *server_url(int *argc, char ***argv)
{
    const char *env = getenv("REDIS_URL");
    if (*argc > 1 && strstr((*argv)[1], "://") != NULL) {
        (*argc)--;
        (*argv)++;
        return (*argv)[0];
    }
    return env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
}

int main(int argc, char **argv)
{
    const char *prog = argv[0];
    const char *url = server_url(&argc, &argv);
    int readers = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 4;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 5.0;
    pid_t pids[65];
    int fds[65];
    result total = {0}, wres = {0};

    if (readers < 1 || readers > 64 || seconds <= 0) {
        fprintf(stderr, "usage: %s [REDIS_URL] [READERS(1..64) [SECONDS]]\n", prog);
        return 2;
    }
    printf("rw_cache: 1 writer and %d readers on %s for %.1f s\n", readers, url, seconds);
    fflush(stdout);
    /* No rlock client exists in this process: each child creates its own after fork(). */
    for (int i = 0; i <= readers; i++) {
        pids[i] = spawn(i == 0, url, seconds, &fds[i]);
        if (pids[i] < 0) {
            perror("fork");
            return 1;
        }
    }
    for (int i = 0; i <= readers; i++) {
        result res = {0};
        int status = 0;

        if (read(fds[i], &res, sizeof(res)) != (ssize_t)sizeof(res)) {
            res.errors++;
        }
        close(fds[i]);
        waitpid(pids[i], &status, 0);
        if (i == 0) {
            wres = res;
            continue;
        }
        total.ops += res.ops;
        total.torn += res.torn;
        total.errors += res.errors;
        if (res.max_inside > total.max_inside) {
            total.max_inside = res.max_inside;
        }
    }
    printf("writer: %ld refreshes, %ld errors\n", wres.ops, wres.errors);
    printf("readers: %ld reads, %ld torn, %ld errors, at most %ld reads ran concurrently\n",
           total.ops, total.torn, total.errors, total.max_inside);
    int ok = total.torn == 0 && total.errors == 0 && wres.errors == 0 && wres.ops > 0 &&
             total.max_inside > 1;
    printf("verdict: %s\n", ok ? "OK (no half-written value seen, reads overlapped)" : "FAILED");
    return ok ? 0 : 1;
}
