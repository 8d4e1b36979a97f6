/*
 * Name resolution within a deadline (resolve.h). glibc's getaddrinfo_a() could be cancelled only
 * before its lookup starts, so it would not bound a lookup already waiting for DNS either; a
 * detached thread per lookup does, at the cost of a thread start per dial by name (dials are
 * rare: the pool keeps its connections). The lookup's record is shared by the caller and the
 * thread and freed by whichever lets go of it last. Static helpers are named resolve_*.
 */
#include "resolve.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "error.h"
#include "util.h"

typedef struct resolve_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* 2 while both the caller and the thread hold it */
    int done; /* the thread's getaddrinfo() returned */
    int gai;  /* its result */
    struct addrinfo *res;
    char service[16];
    char host[]; /* NUL-terminated */
} resolve_job;

static void resolve_hints(struct addrinfo *hints, int flags)
{
    memset(hints, 0, sizeof(*hints));
    hints->ai_family = AF_UNSPEC;
    hints->ai_socktype = SOCK_STREAM;
    hints->ai_flags = AI_NUMERICSERV | flags;
}

/* Drops one reference; the last one frees the job and an answer nobody took. Called with the
 * job's mutex held, which it releases. */
static void resolve_release(resolve_job *j)
{
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) {
        if (j->res != NULL) {
            freeaddrinfo(j->res);
        }
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        free(j);
    }
}

static void *resolve_main(void *arg)
{
    resolve_job *j = arg;
    struct addrinfo hints, *res = NULL;
    resolve_hints(&hints, 0);
    int gai = getaddrinfo(j->host, j->service, &hints, &res);
    pthread_mutex_lock(&j->mu);
    j->gai = gai;
    j->res = gai == 0 ? res : NULL;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    resolve_release(j);
    return NULL;
}

static resolve_job *resolve_job_new(const char *host, int port)
{
    size_t n = strlen(host) + 1;
    resolve_job *j = calloc(1, sizeof(*j) + n);
    if (j == NULL) {
        return NULL;
    }
    memcpy(j->host, host, n);
    snprintf(j->service, sizeof(j->service), "%d", port);
    pthread_mutex_init(&j->mu, NULL);
    rlk_cond_init_monotonic(&j->cv);
    j->refs = 2;
    return j;
}

/* Starts the lookup on its own detached thread; 0, or the errno of pthread_create. */
static int resolve_start(resolve_job *j)
{
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, resolve_main, j);
    pthread_attr_destroy(&attr);
    return e;
}

/* Waits for the job's answer until deadline_ms: 1 when it came, 0 when the time ran out. Called
 * and returns with the job's mutex held. */
static int resolve_wait(resolve_job *j, int64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
                          .tv_nsec = (long)((deadline_ms % 1000) * 1000000)};
    while (!j->done) {
        if (rlk_now_ms() >= deadline_ms ||
            (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && !j->done)) {
            return 0;
        }
    }
    return 1;
}

/* Looks a name up on a helper thread, waiting for it no longer than deadline_ms. */
static int resolve_name(const char *host, int port, const char *where, int64_t deadline_ms,
                        struct addrinfo **res)
{
    resolve_job *j = resolve_job_new(host, port);
    if (j == NULL) {
        return rlk_err(RLOCK_ENOMEM, "connect to %s: cannot allocate a name lookup", where);
    }
    int e = resolve_start(j);
    if (e != 0) {
        j->refs = 1;
        pthread_mutex_lock(&j->mu);
        resolve_release(j);
        return rlk_err(RLOCK_ECONN, "connect to %s: cannot start a name lookup: %s", where,
                       strerror(e));
    }
    pthread_mutex_lock(&j->mu);
    int done = resolve_wait(j, deadline_ms);
    int gai = j->gai;
    *res = done && gai == 0 ? j->res : NULL;
    if (done) {
        j->res = NULL; /* the caller's now */
    }
    resolve_release(j);
    if (!done) {
        return rlk_err(RLOCK_ECONN,
                       "connect to %s: the host name did not resolve within connect_timeout_ms",
                       where);
    }
    return gai == 0 ? RLOCK_OK
                    : rlk_err(RLOCK_ECONN, "connect to %s: cannot resolve the host: %s", where,
                              gai_strerror(gai));
}

int rlk_resolve(const char *host, int port, const char *where, int64_t deadline_ms,
                struct addrinfo **res)
{
    /* An address (IPv4 or IPv6) needs no lookup: converted here, no thread, no DNS. */
    char service[16];
    struct addrinfo hints;
    resolve_hints(&hints, AI_NUMERICHOST);
    snprintf(service, sizeof(service), "%d", port);
    *res = NULL;
    int gai = getaddrinfo(host, service, &hints, res);
    if (gai == 0) {
        return RLOCK_OK;
    }
    if (gai != EAI_NONAME) {
        return rlk_err(RLOCK_ECONN, "connect to %s: cannot use the address: %s", where,
                       gai_strerror(gai));
    }
    return resolve_name(host, port, where, deadline_ms, res);
}
