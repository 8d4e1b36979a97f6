/*
 * counter: several processes increment one Redis counter with a read-modify-write (GET, then
 * SET to the value + 1) protected by an rlock reentrant lock, and the final count is exact.
 *
 *   counter [REDIS_URL] [WORKERS [INCREMENTS]] [--no-lock]
 *
 *   REDIS_URL   redis://host[:port] or unix:///path/to/socket (default: $REDIS_URL, else
 *               redis://127.0.0.1:6379)
 *   WORKERS     processes to fork (default 4)
 *   INCREMENTS  increments per process (default 500)
 *   --no-lock   skip the lock, to see the read-modify-write lose updates without it
 *
 * Exit status: 0 if the counter ends exactly at WORKERS * INCREMENTS, 1 if not, 2 on an error.
 *
 * Every worker is its own process with its own rlock client, so the lock is doing real
 * cross-process work: the GET and SET of two workers would otherwise interleave and an
 * increment would be lost. The lock is acquired with lease -1, so the watchdog keeps it alive
 * however long a critical section takes, and the lock itself is Redisson's data, so a Java
 * service using Redisson's RLock on "example:counter:lock" would take part in the same
 * exclusion.
 *
 * The counter itself is read and written over a deliberately tiny RESP client below (this
 * program links only librlock); a real program would use its usual Redis client.
 */
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rlock.h>

#define COUNTER_KEY "example:counter"
#define LOCK_NAME   "example:counter:lock"

/* ---- a minimal RESP client: connect, send a command, read one reply --------------------- */

typedef struct {
    int fd;
    FILE *in;
} resp_conn;

static int resp_connect_tcp(const char *hostport)
{
    char host[256];
    const char *port = "6379";
    snprintf(host, sizeof(host), "%s", hostport);
    char *slash = strchr(host, '/');
    if (slash != NULL) {
        *slash = '\0'; /* a database number is not supported by this tiny client */
    }
    char *colon = strrchr(host, ':');
    if (colon != NULL) {
        *colon = '\0';
        port = colon + 1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static int resp_connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int resp_connect(const char *url, resp_conn *c)
{
    int fd = -1;
    if (strncmp(url, "redis://", 8) == 0 && strchr(url + 8, '@') == NULL) {
        fd = resp_connect_tcp(url + 8);
    } else if (strncmp(url, "unix://", 7) == 0) {
        fd = resp_connect_unix(url + 7);
    } else {
        fprintf(stderr, "this example's counter connection supports redis://host[:port] and "
                        "unix:///path only (no password)\n");
        return -1;
    }
    if (fd < 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", url, strerror(errno));
        return -1;
    }
    c->fd = fd;
    c->in = fdopen(fd, "r");
    return c->in != NULL ? 0 : -1;
}

static void resp_close(resp_conn *c)
{
    fclose(c->in); /* closes fd too */
}

/* Sends argv as a RESP array and reads one reply. Integer, simple and bulk replies are parsed
 * into *value (nil = 0). Returns 0, or -1 on an I/O error or an error reply. */
static int resp_call(resp_conn *c, int argc, const char **argv, long long *value)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "*%d\r\n", argc);
    for (int i = 0; i < argc && n < (int)sizeof(buf); i++) {
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    }
    if (n >= (int)sizeof(buf) || write(c->fd, buf, (size_t)n) != n) {
        return -1;
    }
    char line[128];
    if (fgets(line, sizeof(line), c->in) == NULL) {
        return -1;
    }
    *value = 0;
    switch (line[0]) {
    case ':':
        *value = strtoll(line + 1, NULL, 10);
        return 0;
    case '+':
        return 0;
    case '$':
        if (strtol(line + 1, NULL, 10) >= 0) {
            if (fgets(line, sizeof(line), c->in) == NULL) {
                return -1;
            }
            *value = strtoll(line, NULL, 10);
        }
        return 0;
    default:
        fprintf(stderr, "Redis replied: %s", line);
        return -1;
    }
}

/* ---- the workers ------------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One worker process: its own rlock client and counter connection. Returns an exit status. */
static int worker(const char *url, int id, int increments, int use_lock)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    rlock_client *client = NULL;
    int r = rlock_client_new(&o, &client);
    if (r != RLOCK_OK) {
        fprintf(stderr, "worker %d: rlock_client_new: %s\n", id, rlock_last_error());
        return 2;
    }
    rlock *lock = rlock_open(client, RLOCK_REENTRANT, LOCK_NAME);
    resp_conn conn;
    if (lock == NULL || resp_connect(url, &conn) != 0) {
        rlock_free(lock);
        rlock_client_free(client);
        return 2;
    }
    int status = 0;
    for (int i = 0; i < increments && status == 0; i++) {
        if (use_lock && rlock_lock(lock, -1) != RLOCK_OK) {
            fprintf(stderr, "worker %d: lock: %s\n", id, rlock_last_error());
            status = 2;
            break;
        }
        /* The critical section: a read-modify-write that is only correct under the lock. */
        long long v = 0;
        const char *get[] = {"GET", COUNTER_KEY};
        char next[32];
        status = resp_call(&conn, 2, get, &v) == 0 ? 0 : 2;
        snprintf(next, sizeof(next), "%lld", v + 1);
        const char *set[] = {"SET", COUNTER_KEY, next};
        status = status == 0 && resp_call(&conn, 3, set, &v) == 0 ? 0 : 2;
        if (use_lock && rlock_unlock(lock) != RLOCK_OK) {
            fprintf(stderr, "worker %d: unlock: %s\n", id, rlock_last_error());
            status = 2;
        }
    }
    resp_close(&conn);
    rlock_free(lock);
    rlock_client_free(client);
    return status;
}

/* The server: the URL argument when there is one, else $REDIS_URL, else a local server. */
static const char *server_url(const char *given)
{
    const char *env = getenv("REDIS_URL");
    if (given != NULL) {
        return given;
    }
    return env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
}

int main(int argc, char **argv)
{
    int use_lock = 1, pos = 0;
    const char *given = NULL;
    const char *args[2] = {"4", "500"};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-lock") == 0) {
            use_lock = 0;
        } else if (given == NULL && pos == 0 && strstr(argv[i], "://") != NULL) {
            given = argv[i];
        } else if (pos < 2) {
            args[pos++] = argv[i];
        }
    }
    long workers = strtol(args[0], NULL, 10), increments = strtol(args[1], NULL, 10);
    if (workers < 1 || workers > 256 || increments < 1 || increments > 100000000) {
        fprintf(stderr, "usage: %s [REDIS_URL] [WORKERS [INCREMENTS]] [--no-lock]\n", argv[0]);
        return 2;
    }
    const char *url = server_url(given);
    resp_conn conn;
    long long v = 0;
    const char *reset[] = {"SET", COUNTER_KEY, "0"};
    if (resp_connect(url, &conn) != 0 || resp_call(&conn, 3, reset, &v) != 0) {
        return 2;
    }
    printf("%ld processes x %ld increments of %s, %s\n", workers, increments, COUNTER_KEY,
           use_lock ? "each GET+SET under the rlock lock \"" LOCK_NAME "\"" : "WITHOUT a lock");
    fflush(stdout); /* so the children do not inherit and repeat buffered output */

    double t0 = now_s();
    pid_t pids[256];
    for (int i = 0; i < workers; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            resp_close(&conn);
            _exit(worker(url, i, (int)increments, use_lock));
        }
        if (pids[i] < 0) {
            perror("fork");
            return 2;
        }
    }
    int failed = 0;
    for (int i = 0; i < workers; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    double took = now_s() - t0;
    const char *get[] = {"GET", COUNTER_KEY};
    long long count = 0;
    int r = resp_call(&conn, 2, get, &count);
    resp_close(&conn);
    if (r != 0 || failed > 0) {
        fprintf(stderr, "%d worker(s) failed\n", failed);
        return 2;
    }
    long long expected = (long long)workers * increments;
    printf("final count %lld, expected %lld: %s (%.2f s, %.0f increments/s)\n", count, expected,
           count == expected ? "exact" : "LOST UPDATES", took, (double)expected / took);
    if (count != expected) {
        printf("%lld increments were lost to interleaved read-modify-writes\n", expected - count);
    }
    return count == expected ? 0 : 1;
}
