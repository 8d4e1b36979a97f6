/*
 * fifo_jobs: several worker processes apply jobs to one shared resource strictly in the order
 * the jobs arrived, using rlock's fair lock, and a checker verifies that they did.
 *
 * The resource is an append-only journal file (think: a ledger that must see updates in arrival
 * order). Jobs 0..J-1 arrive one every --gap ms; job k is handled by worker process k % W, on a
 * thread of its own, which calls rlock_lock() on the fair lock the moment the job arrives. Inside
 * the critical section the worker "applies" the job (sleeps --work ms) and appends one line to
 * the journal: job, worker, arrival, acquisition and release times, and the fencing token. Since
 * the gap between arrivals is far longer than it takes to join the lock's queue, the queue order
 * is the arrival order, and the fair lock must hand the lock over in exactly that order.
 *
 *   fifo_jobs [--url URL] [--name LOCK] [--workers W] [--jobs J] [--gap MS] [--work MS]
 *             [--journal FILE]
 *       runs the workers, then prints what happened and the checker's verdict. URL defaults to
 *       $REDIS_URL, else redis://127.0.0.1:6379.
 *   fifo_jobs --check FILE
 *       only checks an existing journal.
 * Exit status: 0 when the checker passes, 1 when it finds a violation, 2 on errors.
 *
 * The checker needs nothing but the journal: the lines are written inside the critical section,
 * so their order is the order in which the lock was granted. It verifies that every job appears
 * once, that the grant order equals the arrival order (no inversions), that no two critical
 * sections overlap in time, and that fencing tokens strictly increase.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define MAX_JOBS 1000

typedef struct config {
    const char *url;
    const char *name;
    const char *journal;
    int workers;
    int jobs;
    int gap_ms;
    int work_ms;
} config;

/* One journal line. Times are in microseconds since the common start (CLOCK_MONOTONIC is one
 * clock for every process on the machine). */
typedef struct entry {
    int job;
    int worker;
    long pid;
    int64_t arrived_us, acquired_us, released_us;
    unsigned long long token;
} entry;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_until_us(int64_t t)
{
    int64_t d = t - now_us();
    if (d > 0) {
        struct timespec ts = {(time_t)(d / 1000000), (long)(d % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

/* ---- workers ------------------------------------------------------------------------------ */

typedef struct job_thread {
    const config *cfg;
    rlock *lock;
    int64_t start_us;
    int journal_fd;
    int job;
    int worker;
    int failed;
} job_thread;

static void *job_main(void *arg)
{
    job_thread *j = arg;
    sleep_until_us(j->start_us + (int64_t)j->job * j->cfg->gap_ms * 1000);
    int64_t arrived = now_us();
    int rc = rlock_lock(j->lock, -1);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "job %d: rlock_lock: %s: %s\n", j->job, rlock_strerror(rc),
                rlock_last_error());
        j->failed = 1;
        return NULL;
    }
    int64_t acquired = now_us();
    unsigned long long token = (unsigned long long)rlock_token(j->lock);
    /* Apply the job to the resource. */
    sleep_until_us(acquired + (int64_t)j->cfg->work_ms * 1000);
    int64_t released = now_us();
    char line[256];
    int n =
        snprintf(line, sizeof(line),
                 "job=%d worker=%d pid=%ld arrived=%lld acquired=%lld released=%lld "
                 "token=%llu\n",
                 j->job, j->worker, (long)getpid(), (long long)(arrived - j->start_us),
                 (long long)(acquired - j->start_us), (long long)(released - j->start_us), token);
    if (write(j->journal_fd, line, (size_t)n) != n) {
        j->failed = 1;
    }
    rc = rlock_unlock(j->lock);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "job %d: rlock_unlock: %s\n", j->job, rlock_strerror(rc));
        j->failed = 1;
    }
    return NULL;
}

/* A worker process: its own client and handle, one thread per job it owns. */
static int worker_main(const config *cfg, int worker, int64_t start_us)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = cfg->url;
    rlock_client *c = NULL;
    int rc = rlock_client_new(&o, &c);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "worker %d: %s: %s\n", worker, rlock_strerror(rc), rlock_last_error());
        return 2;
    }
    rlock *l = rlock_open(c, RLOCK_FAIR, cfg->name);
    int fd = open(cfg->journal, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (l == NULL || fd < 0) {
        fprintf(stderr, "worker %d: cannot open the lock or the journal\n", worker);
        rlock_free(l);
        rlock_client_free(c);
        return 2;
    }
    static job_thread jt[MAX_JOBS];
    static pthread_t t[MAX_JOBS];
    int n = 0;
    for (int k = worker; k < cfg->jobs; k += cfg->workers) {
        jt[n] = (job_thread){cfg, l, start_us, fd, k, worker, 0};
        if (pthread_create(&t[n], NULL, job_main, &jt[n]) != 0) {
            jt[n].failed = 1;
            break;
        }
        n++;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        failed |= jt[i].failed;
    }
    close(fd);
    rlock_free(l);
    rlock_client_free(c);
    return failed ? 2 : 0;
}

/* ---- checker ------------------------------------------------------------------------------ */

static int read_journal(const char *path, entry *e, int max)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    int n = 0;
    char line[256];
    while (n < max && fgets(line, sizeof(line), f) != NULL) {
        long long a, q, r;
        /* The number of converted fields is checked; a malformed line is skipped. */
        if (sscanf(line, /* NOLINT(cert-err34-c) */
                   "job=%d worker=%d pid=%ld arrived=%lld acquired=%lld released=%lld "
                   "token=%llu",
                   &e[n].job, &e[n].worker, &e[n].pid, &a, &q, &r, &e[n].token) == 7) {
            e[n].arrived_us = a;
            e[n].acquired_us = q;
            e[n].released_us = r;
            n++;
        }
    }
    fclose(f);
    return n;
}

typedef struct verdict {
    int missing, duplicates, inversions, overlaps, token_regressions;
} verdict;

static verdict check(const entry *e, int n, int expected_jobs)
{
    verdict v = {0, 0, 0, 0, 0};
    static unsigned char seen[MAX_JOBS];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < n; i++) {
        if (e[i].job >= 0 && e[i].job < MAX_JOBS) {
            v.duplicates += seen[e[i].job]++ > 0;
        }
        /* Grant order must equal arrival order: count every pair granted the wrong way round. */
        for (int j = i + 1; j < n; j++) {
            v.inversions += e[j].arrived_us < e[i].arrived_us;
        }
        if (i > 0) {
            v.overlaps += e[i].acquired_us < e[i - 1].released_us;
            v.token_regressions += e[i].token <= e[i - 1].token;
        }
    }
    for (int k = 0; k < expected_jobs && k < MAX_JOBS; k++) {
        v.missing += seen[k] == 0;
    }
    return v;
}

static int print_verdict(const verdict *v, int n)
{
    int ok = v->missing == 0 && v->duplicates == 0 && v->inversions == 0 && v->overlaps == 0 &&
             v->token_regressions == 0;
    printf("checker: %d jobs in the journal, %d missing, %d duplicated\n", n, v->missing,
           v->duplicates);
    printf("checker: grant order vs arrival order: %d inversions%s\n", v->inversions,
           v->inversions ? "  <-- NOT FIFO" : "  (strict FIFO)");
    printf("checker: overlapping critical sections: %d; fencing-token regressions: %d\n",
           v->overlaps, v->token_regressions);
    printf("checker: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}

/* ---- report ------------------------------------------------------------------------------- */

static void print_account(const entry *e, int n)
{
    printf("\n  #  job  worker   pid     arrived  queued for   got lock   hand-off   token\n");
    printf("                          (ms)        (ms)        (ms)       (ms)\n");
    double handoff_sum = 0, handoff_max = 0, wait_max = 0;
    for (int i = 0; i < n; i++) {
        double wait = (double)(e[i].acquired_us - e[i].arrived_us) / 1000.0;
        char handoff[16] = "         -";
        if (i > 0) {
            double h = (double)(e[i].acquired_us - e[i - 1].released_us) / 1000.0;
            handoff_sum += h;
            handoff_max = h > handoff_max ? h : handoff_max;
            snprintf(handoff, sizeof(handoff), "%10.2f", h);
        }
        wait_max = wait > wait_max ? wait : wait_max;
        printf("%3d  %3d  %6d  %6ld  %10.1f  %10.1f  %9.1f %s  %6llu\n", i + 1, e[i].job,
               e[i].worker, e[i].pid, (double)e[i].arrived_us / 1000.0, wait,
               (double)e[i].acquired_us / 1000.0, handoff, e[i].token);
    }
    if (n > 1) {
        printf("\nhand-off (release -> next waiter holds the lock): mean %.2f ms, max %.2f ms; "
               "longest wait in the queue %.1f ms\n\n",
               handoff_sum / (n - 1), handoff_max, wait_max);
    }
}

/* ---- main --------------------------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr, "usage: fifo_jobs [--url URL] [--name LOCK] [--workers W] [--jobs J] "
                    "[--gap MS] [--work MS] [--journal FILE]\n"
                    "       fifo_jobs --check FILE\n");
    return 2;
}

/* A whole decimal number in [lo, hi], or -1 (never a valid value here) on anything else. */
static int parse_int(const char *v, int lo, int hi)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
        return -1;
    }
    return (int)x;
}

static int parse(int argc, char **argv, config *cfg, const char **check)
{
    int i = 1;
    while (i + 1 < argc) {
        const char *opt = argv[i], *v = argv[i + 1];
        if (strcmp(opt, "--url") == 0) {
            cfg->url = v;
        } else if (strcmp(opt, "--name") == 0) {
            cfg->name = v;
        } else if (strcmp(opt, "--journal") == 0) {
            cfg->journal = v;
        } else if (strcmp(opt, "--check") == 0) {
            *check = v;
        } else if (strcmp(opt, "--workers") == 0) {
            cfg->workers = parse_int(v, 1, 64);
        } else if (strcmp(opt, "--jobs") == 0) {
            cfg->jobs = parse_int(v, 1, MAX_JOBS);
        } else if (strcmp(opt, "--gap") == 0) {
            cfg->gap_ms = parse_int(v, 1, 60000);
        } else if (strcmp(opt, "--work") == 0) {
            cfg->work_ms = parse_int(v, 0, 60000);
        } else {
            return -1;
        }
        i += 2;
    }
    int bad = i != argc || cfg->workers < 0 || cfg->jobs < 0 || cfg->gap_ms < 0 || cfg->work_ms < 0;
    return bad ? -1 : 0;
}

static int run(const config *cfg)
{
    int fd = open(cfg->journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "cannot create %s: %s\n", cfg->journal, strerror(errno));
        return 2;
    }
    close(fd);
    printf("%d jobs arrive one every %d ms; %d worker processes apply each for %d ms under the "
           "fair lock '%s'\n",
           cfg->jobs, cfg->gap_ms, cfg->workers, cfg->work_ms, cfg->name);
    fflush(stdout);
    /* The workers are forked before this process creates any thread or client. */
    int64_t start = now_us() + 300000;
    pid_t pids[64];
    for (int w = 0; w < cfg->workers; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            _exit(worker_main(cfg, w, start));
        }
        if (pids[w] < 0) {
            fprintf(stderr, "fork: %s\n", strerror(errno));
            return 2;
        }
    }
    int failed = 0;
    for (int w = 0; w < cfg->workers; w++) {
        int status = 0;
        waitpid(pids[w], &status, 0);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    static entry e[MAX_JOBS];
    int n = read_journal(cfg->journal, e, MAX_JOBS);
    if (n < 0) {
        return 2;
    }
    print_account(e, n);
    verdict v = check(e, n, cfg->jobs);
    int rc = print_verdict(&v, n);
    return failed ? 2 : rc;
}

/* The server when --url is not given: $REDIS_URL, else a local server. */
static const char *default_url(void)
{
    const char *env = getenv("REDIS_URL");
    return env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
}

int main(int argc, char **argv)
{
    config cfg = {default_url(), "fifo-jobs:resource", "fifo_jobs.journal", 4, 24, 20, 30};
    const char *check_path = NULL;
    if (parse(argc, argv, &cfg, &check_path) != 0) {
        return usage();
    }
    if (check_path != NULL) {
        static entry e[MAX_JOBS];
        int n = read_journal(check_path, e, MAX_JOBS);
        if (n < 0) {
            return 2;
        }
        int max_job = -1;
        for (int i = 0; i < n; i++) {
            max_job = e[i].job > max_job ? e[i].job : max_job;
        }
        verdict v = check(e, n, max_job + 1);
        return print_verdict(&v, n);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run(&cfg);
}
