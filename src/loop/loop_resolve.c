/*
 * Host names for loop connections (loop_resolve.h). getaddrinfo() has no non-blocking form that
 * a caller's loop could drive, so a detached thread does the one lookup and ends; it writes one
 * byte to a socket pair (send with MSG_NOSIGNAL: the loop side may have gone) and the loop's
 * watcher of the other end hands the answer on. The record is shared by the loop side and the
 * thread and freed by whichever lets go of it last. Static helpers are named lres_*.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "loop_resolve.h"

struct rlk_lresolve {
    atomic_int refs; /* 2 while both the loop side and the thread hold it */
    atomic_int done; /* the thread stored its answer (release), read by the loop (acquire) */
    int fds[2];      /* [0]: the loop's end, [1]: the thread's */
    rlock_loop loop;
    void *io;
    rlk_lresolve_fn fn;
    void *arg;
    int gai;
    struct addrinfo *ai;
    char service[16];
    char host[]; /* NUL-terminated */
};

static void lres_unref(rlk_lresolve *r)
{
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) {
        return;
    }
    if (r->ai != NULL) {
        freeaddrinfo(r->ai);
    }
    close(r->fds[0]);
    close(r->fds[1]);
    free(r);
}

static void *lres_main(void *arg)
{
    rlk_lresolve *r = arg;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    r->gai = getaddrinfo(r->host, r->service, &hints, &ai);
    r->ai = r->gai == 0 ? ai : NULL;
    atomic_store_explicit(&r->done, 1, memory_order_release);
    (void)send(r->fds[1], "r", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    lres_unref(r);
    return NULL;
}

/* The thread's byte arrived: the lookup is over. The watcher goes first, then the answer is
 * taken out of the record, which the loop side lets go of before fn runs. */
static void lres_on_io(void *arg, int events)
{
    rlk_lresolve *r = arg;
    (void)events;
    if (!atomic_load_explicit(&r->done, memory_order_acquire)) {
        return; /* a spurious wake-up: the byte comes after the answer */
    }
    r->loop.io_free(r->io);
    struct addrinfo *ai = r->ai;
    int gai = r->gai;
    r->ai = NULL;
    rlk_lresolve_fn fn = r->fn;
    void *fn_arg = r->arg;
    char host[256];
    snprintf(host, sizeof(host), "%s:%s", r->host, r->service);
    lres_unref(r);
    if (ai == NULL) {
        fn(fn_arg, NULL,
           rlk_err(RLOCK_ECONN, "cannot resolve %s: %s", host,
                   gai != 0 ? gai_strerror(gai) : "no address"));
        return;
    }
    fn(fn_arg, ai, RLOCK_OK);
}

static int lres_spawn(rlk_lresolve *r)
{
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) != 0) {
        return rlk_err(RLOCK_ENOMEM, "cannot start a name lookup");
    }
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    int e = pthread_create(&th, &attr, lres_main, r);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        atomic_fetch_sub_explicit(&r->refs, 1, memory_order_relaxed);
        return rlk_err(RLOCK_ECONN, "cannot start a thread to look up %s (error %d)", r->host, e);
    }
    return RLOCK_OK;
}

int rlk_lresolve_start(const rlock_loop *loop, const char *host, int port, rlk_lresolve_fn fn,
                       void *arg, rlk_lresolve **out)
{
    *out = NULL;
    size_t n = strlen(host) + 1;
    rlk_lresolve *r = calloc(1, sizeof(*r) + n);
    if (r == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory looking up a host name");
    }
    memcpy(r->host, host, n);
    snprintf(r->service, sizeof(r->service), "%d", port);
    atomic_init(&r->refs, 1);
    atomic_init(&r->done, 0);
    r->loop = *loop;
    r->fn = fn;
    r->arg = arg;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, r->fds) != 0) {
        free(r);
        return rlk_err(RLOCK_ECONN, "cannot make a socket pair (errno %d)", errno);
    }
    r->io = loop->io_new(loop->loop_data, r->fds[0], lres_on_io, r);
    int rc = r->io != NULL && loop->io_set(r->io, RLOCK_LOOP_READ) == 0
                 ? RLOCK_OK
                 : rlk_err(RLOCK_ENOMEM, "the loop could not watch a name lookup");
    rc = rc ? rc : lres_spawn(r);
    if (rc != RLOCK_OK) {
        if (r->io != NULL) {
            loop->io_free(r->io);
        }
        lres_unref(r);
        return rc;
    }
    *out = r;
    return RLOCK_OK;
}

void rlk_lresolve_cancel(rlk_lresolve *r)
{
    if (r == NULL) {
        return;
    }
    r->loop.io_free(r->io);
    lres_unref(r);
}
