/*
 * metrics_http: serves one client's figures (rlock_metrics_text()) at GET /metrics over plain
 * HTTP on a loopback port, for Prometheus to scrape, while worker threads take and release a lock
 * and a semaphore on that client.
 *
 *   metrics_http [REDIS_URL] [PORT [OPS [REQUESTS]]]
 *
 *   REDIS_URL  default: $REDIS_URL, else redis://127.0.0.1:6379
 *   PORT       loopback port to listen on (default 9464; 0 takes a free one)
 *   OPS        rounds per worker: lock then unlock "example:metrics:lock", acquire then release
 *              a permit of "example:metrics:sem" (default 1000)
 *   REQUESTS   requests to answer before exiting (default 0: until SIGINT or SIGTERM)
 *
 * Prints "listening on http://127.0.0.1:PORT/metrics" once it listens and "done: N lock
 * acquires, N semaphore acquires" when the workers finish. Exit status 0, or 2 on an error.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <rlock.h>

#define WORKERS 3

static rlock *lock;
static rlock_semaphore *sem;
static int ops = 1000;
static atomic_int locked, permits;
static atomic_int stopping; /* lock-free, so a signal handler may store it */

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stopping, 1);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ops && !atomic_load(&stopping); i++) {
        if (rlock_lock(lock, -1) == RLOCK_OK) {
            atomic_fetch_add(&locked, 1);
            rlock_unlock(lock);
        }
        if (rlock_semaphore_acquire(sem, 1, RLOCK_WAIT_FOREVER) == RLOCK_OK) {
            atomic_fetch_add(&permits, 1);
            rlock_semaphore_release(sem, 1);
        }
    }
    return NULL;
}

/* Runs the workers and says when they are done, while main() serves. */
static void *run_workers(void *arg)
{
    (void)arg;
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        pthread_create(&t[i], NULL, worker, NULL);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
    }
    printf("done: %d lock acquires, %d semaphore acquires\n", atomic_load(&locked),
           atomic_load(&permits));
    fflush(stdout);
    return NULL;
}

/* Answers one HTTP request on fd: the metrics for GET /metrics, 404 for anything else. */
static void serve(int fd, rlock_client *client)
{
    char req[1024];
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(fd, req, sizeof(req) - 1, 0);
    req[n > 0 ? n : 0] = '\0';
    char *text = NULL;
    int found = strncmp(req, "GET /metrics ", 13) == 0 && rlock_metrics_text(client, &text) == 0;
    const char *body = found ? text : "not found\n";
    char head[256];
    int len = snprintf(head, sizeof(head),
                       "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n",
                       found ? "200 OK" : "404 Not Found",
                       found ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                             : "text/plain",
                       strlen(body));
    if (send(fd, head, (size_t)len, MSG_NOSIGNAL) == len) {
        send(fd, body, strlen(body), MSG_NOSIGNAL);
    }
    rlock_metrics_free(text);
    close(fd);
}

/* A listening socket on 127.0.0.1:port (0: any free port, written back), or -1. */
static int listen_on(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("metrics_http: listen");
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int main(int argc, char **argv)
{
    int a = argc > 1 && strstr(argv[1], "://") != NULL ? 2 : 1;
    const char *url = a == 2 ? argv[1] : getenv("REDIS_URL");
    int port = argc > a ? (int)strtol(argv[a], NULL, 10) : 9464;
    ops = argc > a + 1 ? (int)strtol(argv[a + 1], NULL, 10) : 1000;
    int requests = argc > a + 2 ? (int)strtol(argv[a + 2], NULL, 10) : 0;
    if (port < 0 || port > 65535 || ops < 0 || requests < 0) {
        fprintf(stderr, "usage: metrics_http [REDIS_URL] [PORT [OPS [REQUESTS]]]\n");
        return 2;
    }
    rlock_options opts;
    rlock_options_init(&opts);
    opts.url = url != NULL ? url : "redis://127.0.0.1:6379";
    rlock_client *client = NULL;
    if (rlock_client_new(&opts, &client) != RLOCK_OK ||
        (lock = rlock_open(client, RLOCK_REENTRANT, "example:metrics:lock")) == NULL ||
        (sem = rlock_semaphore_open(client, "example:metrics:sem")) == NULL ||
        rlock_semaphore_try_set_permits(sem, 2) < 0) {
        fprintf(stderr, "metrics_http: %s\n", rlock_last_error());
        return 2;
    }
    int fd = listen_on(&port);
    if (fd < 0) {
        return 2;
    }
    /* No SA_RESTART: a signal interrupts accept(), so the loop below sees it. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    printf("listening on http://127.0.0.1:%d/metrics\n", port);
    fflush(stdout);
    pthread_t workers;
    pthread_create(&workers, NULL, run_workers, NULL);
    for (int served = 0; !atomic_load(&stopping) && (requests == 0 || served < requests);) {
        int conn = accept(fd, NULL, NULL);
        if (conn >= 0) {
            serve(conn, client);
            served++;
        }
    }
    atomic_store(&stopping, 1); /* the workers stop early too */
    pthread_join(workers, NULL);
    close(fd);
    rlock_semaphore_free(sem);
    rlock_free(lock);
    rlock_client_free(client);
    return 0;
}
