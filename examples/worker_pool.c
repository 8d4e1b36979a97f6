/*
 * worker_pool: a dispatcher takes a lock for each job and hands the job to a pool of worker
 * threads; the worker that runs the job releases the lock when it is done. The hold belongs to
 * an rlock_owner, not to the thread that took it, so another thread may release it. A
 * cancellation token fired by SIGINT or SIGTERM ends the dispatcher's wait for a busy lock.
 *
 *   worker_pool [REDIS_URL] [WORKERS [JOBS]]
 *
 *   REDIS_URL  default: $REDIS_URL, else redis://127.0.0.1:6379
 *   WORKERS    worker threads (default 4)
 *   JOBS       jobs to run (default 40), over 3 resources "example:pool:<k>"
 *
 * Exit status: 0 when every job ran with its resource held by nobody else, 1 if not, 2 on an
 * error (130 when interrupted).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rlock.h>

#define RESOURCES 3
#define QUEUE_MAX 8

typedef struct job {
    int resource;
    rlock_owner *owner; /* holds locks[resource] until the worker is done */
} job;

static rlock *locks[RESOURCES];
static atomic_int inside[RESOURCES]; /* jobs running on each resource: never more than 1 */
static atomic_int overlaps, done;
static job queue[QUEUE_MAX];
static int q_head, q_len, q_closed;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;
static rlock_cancel *stop;

static void on_signal(int sig)
{
    (void)sig;
    rlock_cancel_fire(stop); /* async-signal-safe */
}

static void queue_put(job j)
{
    pthread_mutex_lock(&q_mu);
    while (q_len == QUEUE_MAX) {
        pthread_cond_wait(&q_cv, &q_mu);
    }
    queue[(q_head + q_len++) % QUEUE_MAX] = j;
    pthread_cond_broadcast(&q_cv);
    pthread_mutex_unlock(&q_mu);
}

/* The next job, or 0 once the queue is closed and empty. */
static int queue_get(job *j)
{
    pthread_mutex_lock(&q_mu);
    while (q_len == 0 && !q_closed) {
        pthread_cond_wait(&q_cv, &q_mu);
    }
    int got = q_len > 0;
    if (got) {
        *j = queue[q_head];
        q_head = (q_head + 1) % QUEUE_MAX;
        q_len--;
        pthread_cond_broadcast(&q_cv);
    }
    pthread_mutex_unlock(&q_mu);
    return got;
}

static void *worker(void *arg)
{
    (void)arg;
    job j;
    while (queue_get(&j)) {
        if (atomic_fetch_add(&inside[j.resource], 1) != 0) {
            atomic_fetch_add(&overlaps, 1);
        }
        struct timespec ts = {0, 2 * 1000000L}; /* the job's work */
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&inside[j.resource], 1);
        /* Released on this thread, although the dispatcher thread took it. */
        int rc = rlock_unlock_ex(locks[j.resource], j.owner);
        if (rc != RLOCK_OK) {
            fprintf(stderr, "unlock: %s\n", rlock_last_error());
        }
        rlock_owner_free(j.owner);
        atomic_fetch_add(&done, 1);
    }
    return NULL;
}

/* Takes each job's lock as a new owner and queues the job; 0, or the error that stopped it. */
static int dispatch(rlock_client *client, int jobs)
{
    for (int i = 0; i < jobs; i++) {
        job j = {.resource = i % RESOURCES};
        if (rlock_owner_new(client, &j.owner) != RLOCK_OK) {
            return RLOCK_ENOMEM;
        }
        rlock_lock_args args;
        rlock_lock_args_init(&args);
        args.owner = j.owner;
        args.cancel = stop;
        args.lease_ms = 30000;
        int rc = rlock_lock_ex(locks[j.resource], &args);
        if (rc != RLOCK_OK) {
            rlock_owner_free(j.owner);
            return rc;
        }
        queue_put(j);
    }
    return RLOCK_OK;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("REDIS_URL");
    int workers = argc > 2 ? atoi(argv[2]) : 4;
    int jobs = argc > 3 ? atoi(argv[3]) : 40;
    if (workers < 1 || workers > 64 || jobs < 1) {
        fprintf(stderr, "usage: worker_pool [REDIS_URL] [WORKERS (1-64) [JOBS]]\n");
        return 2;
    }
    rlock_options opts;
    rlock_options_init(&opts);
    opts.url = url != NULL ? url : "redis://127.0.0.1:6379";
    rlock_client *client = NULL;
    if (rlock_client_new(&opts, &client) != RLOCK_OK || rlock_cancel_new(&stop) != RLOCK_OK) {
        fprintf(stderr, "worker_pool: %s\n", rlock_last_error());
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int k = 0; k < RESOURCES; k++) {
        char name[32];
        snprintf(name, sizeof(name), "example:pool:%d", k);
        locks[k] = rlock_open(client, RLOCK_REENTRANT, name);
    }
    pthread_t t[64];
    for (int i = 0; i < workers; i++) {
        pthread_create(&t[i], NULL, worker, NULL);
    }
    int rc = dispatch(client, jobs);
    pthread_mutex_lock(&q_mu);
    q_closed = 1;
    pthread_cond_broadcast(&q_cv);
    pthread_mutex_unlock(&q_mu);
    for (int i = 0; i < workers; i++) {
        pthread_join(t[i], NULL);
    }
    printf("worker_pool: %d jobs done by %d workers, %d overlaps%s\n", atomic_load(&done), workers,
           atomic_load(&overlaps), rc == RLOCK_ECANCELED ? " (interrupted)" : "");
    for (int k = 0; k < RESOURCES; k++) {
        rlock_free(locks[k]);
    }
    rlock_client_free(client);
    rlock_cancel_free(stop);
    if (rc == RLOCK_ECANCELED) {
        return 130;
    }
    return rc != RLOCK_OK ? 2 : (atomic_load(&overlaps) == 0 && atomic_load(&done) == jobs ? 0 : 1);
}
