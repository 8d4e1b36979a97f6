/*
 * Cancellation tokens (cancel.h). rlock_cancel_fire() must be async-signal-safe, so it only sets
 * an atomic flag and writes one byte to a pipe; a process-wide cancel thread, alive while any
 * token exists, reads the pipe and wakes the waits registered with fired tokens.
 */
#include "cancel.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

struct rlock_cancel {
    atomic_int fired;
};

/* The cancel thread and what it watches. mu guards everything but wfd, which fire() reads
 * without a lock (it may run in a signal handler). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* broadcast when a wake returns (a watch's busy cleared) */
    rlk_cancel_watch *head;
    long tokens;    /* live tokens: the thread runs while there are any */
    int rfd;        /* read end of the pipe, -1 when the thread is not running */
    atomic_int wfd; /* write end, -1 when the thread is not running */
    int running;    /* the thread runs in this process */
    int stop;       /* asks the thread to exit */
    int stopping;   /* a free is joining the thread (with the mutex dropped) */
    pthread_t thread;
    atomic_uint_fast64_t rounds;
} cancel_hub = {.mu = PTHREAD_MUTEX_INITIALIZER, .rfd = -1, .wfd = -1};

static pthread_once_t cancel_once = PTHREAD_ONCE_INIT;

/* fork(): the child has no cancel thread, and the pipe it inherits is the parent's, whose thread
 * would take the child's bytes. The child forgets both; its next token or wait starts its own. */
static void cancel_fork_prepare(void)
{
    pthread_mutex_lock(&cancel_hub.mu);
}

static void cancel_fork_parent(void)
{
    pthread_mutex_unlock(&cancel_hub.mu);
}

static void cancel_fork_child(void)
{
    if (cancel_hub.running) {
        int wfd = atomic_load(&cancel_hub.wfd);
        close(cancel_hub.rfd);
        if (wfd >= 0) {
            close(wfd);
        }
    }
    cancel_hub.rfd = -1;
    atomic_store(&cancel_hub.wfd, -1);
    cancel_hub.running = 0;
    cancel_hub.stop = 0;
    cancel_hub.stopping = 0;
    cancel_hub.head = NULL; /* the parent's waits are not this process' */
    pthread_mutex_unlock(&cancel_hub.mu);
}

static void cancel_init(void)
{
    rlk_cond_init_monotonic(&cancel_hub.idle);
    (void)pthread_atfork(cancel_fork_prepare, cancel_fork_parent, cancel_fork_child);
}

/* Wakes every registered wait whose token fired, once each. The hub mutex is dropped around each
 * wake (it takes the waiter's mutex, and a waiter registers without holding it), so the scan
 * starts over after each. Mutex held. */
static void cancel_wake_fired(void)
{
    rlk_cancel_watch *w = cancel_hub.head;
    while (w != NULL) {
        if (w->woken || !rlk_cancel_is_fired(w->token)) {
            w = w->next;
            continue;
        }
        w->woken = 1;
        w->busy = 1;
        pthread_mutex_unlock(&cancel_hub.mu);
        w->wake(w->arg);
        pthread_mutex_lock(&cancel_hub.mu);
        w->busy = 0;
        pthread_cond_broadcast(&cancel_hub.idle);
        w = cancel_hub.head;
    }
}

static void *cancel_thread_main(void *arg)
{
    (void)arg;
    char buf[64];
    pthread_mutex_lock(&cancel_hub.mu);
    int rfd = cancel_hub.rfd;
    while (!cancel_hub.stop) {
        pthread_mutex_unlock(&cancel_hub.mu);
        struct pollfd p = {.fd = rfd, .events = POLLIN};
        (void)poll(&p, 1, -1);
        while (read(rfd, buf, sizeof(buf)) > 0) {
        }
        atomic_fetch_add(&cancel_hub.rounds, 1);
        pthread_mutex_lock(&cancel_hub.mu);
        cancel_wake_fired();
    }
    pthread_mutex_unlock(&cancel_hub.mu);
    return NULL;
}

/* Starts the pipe and the thread if tokens exist and they do not run here. Mutex held. */
static int cancel_hub_start(void)
{
    int fds[2];
    if (cancel_hub.running || cancel_hub.stopping || cancel_hub.tokens == 0) {
        return RLOCK_OK;
    }
    if (pipe(fds) != 0) {
        return rlk_err(RLOCK_ECONN, "cancellation token: pipe() failed (errno %d)", errno);
    }
    for (int i = 0; i < 2; i++) {
        (void)fcntl(fds[i], F_SETFL, O_NONBLOCK);
        (void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    cancel_hub.rfd = fds[0];
    cancel_hub.stop = 0;
    if (pthread_create(&cancel_hub.thread, NULL, cancel_thread_main, NULL) != 0) {
        close(fds[0]);
        close(fds[1]);
        cancel_hub.rfd = -1;
        return rlk_err(RLOCK_ECONN, "cancellation token: the cancel thread did not start");
    }
    atomic_store(&cancel_hub.wfd, fds[1]);
    cancel_hub.running = 1;
    return RLOCK_OK;
}

/* Stops the thread when the last token goes. Mutex held on entry and exit. */
static void cancel_hub_stop(void)
{
    if (!cancel_hub.running || cancel_hub.stopping || cancel_hub.tokens > 0) {
        return;
    }
    cancel_hub.stopping = 1;
    int wfd = atomic_exchange(&cancel_hub.wfd, -1);
    cancel_hub.stop = 1;
    ssize_t n = write(wfd, "s", 1);
    (void)n;
    pthread_t t = cancel_hub.thread;
    pthread_mutex_unlock(&cancel_hub.mu);
    pthread_join(t, NULL);
    pthread_mutex_lock(&cancel_hub.mu);
    close(cancel_hub.rfd);
    close(wfd);
    cancel_hub.rfd = -1;
    cancel_hub.running = 0;
    cancel_hub.stopping = 0;
    /* A token created while the thread was being joined found it running: start it again. */
    (void)cancel_hub_start();
}

RLOCK_EXPORT int rlock_cancel_new(rlock_cancel **out)
{
    if (out == NULL) {
        return rlk_err(RLOCK_EINVAL, "rlock_cancel_new: out is NULL");
    }
    *out = NULL;
    pthread_once(&cancel_once, cancel_init);
    rlock_cancel *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_cancel_new: out of memory");
    }
    pthread_mutex_lock(&cancel_hub.mu);
    cancel_hub.tokens++;
    int r = cancel_hub_start();
    if (r != RLOCK_OK) {
        cancel_hub.tokens--;
    }
    pthread_mutex_unlock(&cancel_hub.mu);
    if (r != RLOCK_OK) {
        free(t);
        return r;
    }
    *out = t;
    return RLOCK_OK;
}

RLOCK_EXPORT void rlock_cancel_fire(rlock_cancel *cancel)
{
    if (cancel == NULL || atomic_exchange(&cancel->fired, 1) != 0) {
        return;
    }
    int saved = errno; /* a signal handler must leave errno as it found it */
    int fd = atomic_load(&cancel_hub.wfd);
    if (fd >= 0) {
        /* A full pipe already holds a byte the thread has yet to read: nothing is lost. */
        ssize_t n = write(fd, "c", 1);
        (void)n;
    }
    errno = saved;
}

RLOCK_EXPORT int rlock_cancel_fired(const rlock_cancel *cancel)
{
    return rlk_cancel_is_fired(cancel);
}

RLOCK_EXPORT void rlock_cancel_free(rlock_cancel *cancel)
{
    if (cancel == NULL) {
        return;
    }
    pthread_mutex_lock(&cancel_hub.mu);
    cancel_hub.tokens--;
    cancel_hub_stop();
    pthread_mutex_unlock(&cancel_hub.mu);
    free(cancel);
}

int rlk_cancel_is_fired(const rlock_cancel *token)
{
    return token != NULL && atomic_load(&((rlock_cancel *)token)->fired) != 0;
}

int rlk_cancel_check(const rlock_cancel *token, const char *what, const char *name)
{
    if (!rlk_cancel_is_fired(token)) {
        return RLOCK_OK;
    }
    return rlk_err(RLOCK_ECANCELED, "%s '%s': the wait was cancelled", what, name);
}

int rlk_cancel_watch_begin(rlk_cancel_watch *w, const rlock_cancel *token, void (*wake)(void *),
                           void *arg)
{
    *w = (rlk_cancel_watch){.token = token, .wake = wake, .arg = arg};
    if (token == NULL) {
        return RLOCK_OK;
    }
    pthread_mutex_lock(&cancel_hub.mu);
    int r = cancel_hub_start(); /* a fork child's first wait */
    if (r == RLOCK_OK) {
        w->next = cancel_hub.head;
        if (cancel_hub.head != NULL) {
            cancel_hub.head->prev = w;
        }
        cancel_hub.head = w;
    }
    pthread_mutex_unlock(&cancel_hub.mu);
    if (r != RLOCK_OK) {
        w->token = NULL;
    }
    return r;
}

void rlk_cancel_watch_end(rlk_cancel_watch *w)
{
    if (w->token == NULL) {
        return;
    }
    pthread_mutex_lock(&cancel_hub.mu);
    while (w->busy) {
        pthread_cond_wait(&cancel_hub.idle, &cancel_hub.mu);
    }
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else if (cancel_hub.head == w) {
        cancel_hub.head = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    }
    pthread_mutex_unlock(&cancel_hub.mu);
    w->token = NULL;
}

/* A sleeper of rlk_cancel_sleep(): its own mutex and condition variable. */
typedef struct cancel_sleeper {
    pthread_mutex_t mu;
    pthread_cond_t cv;
} cancel_sleeper;

static void cancel_sleeper_wake(void *arg)
{
    cancel_sleeper *s = arg;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int rlk_cancel_sleep(const rlock_cancel *token, int64_t deadline)
{
    cancel_sleeper s;
    rlk_cancel_watch w;
    pthread_mutex_init(&s.mu, NULL);
    rlk_cond_init_monotonic(&s.cv);
    int watched = rlk_cancel_watch_begin(&w, token, cancel_sleeper_wake, &s) == RLOCK_OK;
    pthread_mutex_lock(&s.mu);
    while (!rlk_cancel_is_fired(token) && rlk_now_ms() < deadline) {
        if (deadline == INT64_MAX && watched) {
            pthread_cond_wait(&s.cv, &s.mu);
            continue;
        }
        /* Without a watch (the cancel thread did not start) the sleep is sliced so that a
         * firing is still seen within 10 ms. */
        int64_t until = watched ? deadline : rlk_add_sat(rlk_now_ms(), 10);
        until = until < deadline ? until : deadline;
        struct timespec ts = {(time_t)(until / 1000), (long)((until % 1000) * 1000000)};
        pthread_cond_timedwait(&s.cv, &s.mu, &ts);
    }
    pthread_mutex_unlock(&s.mu);
    rlk_cancel_watch_end(&w);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    return rlk_cancel_is_fired(token);
}

uint64_t rlk_cancel_thread_rounds(void)
{
    return (uint64_t)atomic_load(&cancel_hub.rounds);
}
