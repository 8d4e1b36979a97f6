/*
 * The stress driver: procs forked processes x threads threads x iterations (or a duration), every
 * thread calling the test's step once an iteration, with the independent checker (tc_checker.h)
 * in memory that all of them share. The test supplies what a process sets up (its own client and
 * handles: clients are never shared across fork()) and what one iteration does; the driver forks,
 * runs, counts errors and retries across processes, and hands the checker back to the parent.
 *
 * The processes are forked by tc_stress_start(), which must therefore run before the parent
 * creates any thread or rlock client (see rh_fork_child()).
 */
#ifndef RLOCK_TESTS_TC_STRESS_H
#define RLOCK_TESTS_TC_STRESS_H

#include <stdint.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_checker.h"

#if defined(__SANITIZE_THREAD__)
#define TC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TC_TSAN 1
#endif
#endif
#ifndef TC_TSAN
#define TC_TSAN 0
#endif

/* What a step returns. */
enum {
    TC_STEP_OK = 0,     /* the iteration is done */
    TC_STEP_RETRY = 1,  /* not done (a timed-out attempt): counted, and the iteration runs again */
    TC_STEP_ERROR = -1, /* an unexpected failure: counted as an error, the iteration is done */
};

typedef struct tc_worker {
    int proc, thread; /* this worker's process and thread index */
    void *proc_ctx;   /* what the spec's proc_init returned in this process */
    void *arg;        /* the spec's arg */
    tc_mx *mx;        /* the shared checker */
    unsigned seed;    /* for rand_r(), different in every worker */
    long errors, retries;
} tc_worker;

typedef struct tc_stress_spec {
    int procs, threads;
    long iters;          /* per thread; 0 = until duration_ms */
    int64_t duration_ms; /* 0 = no time limit */
    int64_t timeout_ms;  /* how long the parent waits for a child (default 120 s) */
    long max_retries;    /* per thread, after which the thread gives up (default 100,000) */
    /* In each child, before its threads start: its clients and handles, or NULL on failure. */
    void *(*proc_init)(int proc, void *arg);
    void (*proc_fini)(void *proc_ctx);
    int (*step)(tc_worker *w, long i);
    void *arg;
} tc_stress_spec;

typedef struct tc_stress_result {
    int failed_procs; /* children that did not exit 0 (setup failed, crashed, timed out) */
    long errors, retries, iterations;
    int64_t took_ms;
} tc_stress_result;

typedef struct tc_stress tc_stress;

/* Forks the processes and returns at once; NULL on failure. */
tc_stress *tc_stress_start(const tc_stress_spec *spec);
/* The checker, live while the run goes on (for a test that injects a fault mid-run). */
tc_mx *tc_stress_mx(tc_stress *st);
/* Waits for every child and fills *out. */
void tc_stress_wait(tc_stress *st, tc_stress_result *out);
void tc_stress_free(tc_stress *st);

/* The common child setup: one client on a server, opened with the options tune() leaves (the
 * url is the server's), and a handle for each (type, name); tc_proc_open and tc_proc_close are a
 * spec's proc_init and proc_fini when its arg is a tc_handles. */
#define TC_MAX_HANDLES 8
typedef struct tc_handles {
    const rh_server *srv;
    void (*tune)(rlock_options *o); /* NULL: tc_options() as they are */
    int n;
    rlock_kind type[TC_MAX_HANDLES];
    const char *name[TC_MAX_HANDLES];
} tc_handles;

typedef struct tc_proc {
    rlock_client *c;
    rlock *h[TC_MAX_HANDLES]; /* shared by the process' threads */
} tc_proc;

void *tc_proc_open(int proc, void *handles);
void tc_proc_close(void *proc_ctx);

/* A step for a tc_proc process: lock its first handle (a watchdog hold on even iterations, a
 * 10 s lease on odd ones), one exclusive section on checker slot 0, unlock. */
int tc_step_exclusive(tc_worker *w, long i);

/* What a finished run leaves: the driver's totals and the checker's counts. */
typedef struct tc_stress_report {
    tc_stress_result res;
    long violations;
    long counter[TC_MX_SLOTS], entries[TC_MX_SLOTS], reads[TC_MX_SLOTS];
    long max_readers[TC_MX_SLOTS];
} tc_stress_report;

/* Starts, waits and frees a run; fails the cmocka test when the run cannot start. */
void tc_stress_run(const tc_stress_spec *spec, tc_stress_report *out);
/* tc_stress_run() with every process opening the handles hs (tc_proc_open/tc_proc_close): the
 * spec's proc_init, proc_fini and arg are set here. */
void tc_stress_run_handles(tc_stress_spec *spec, tc_handles *hs, tc_stress_report *out);
/* Fills *out from a run that tc_stress_wait() finished. */
void tc_stress_snapshot(tc_stress *st, const tc_stress_result *res, tc_stress_report *out);
/* Asserts the run is clean: every process exited 0, no error, no violation, and in every slot
 * the non-atomic counter equals the atomic count of sections (no lost update). */
void tc_assert_clean(const tc_stress_report *r);

/* The whole mutual-exclusion run of a single-key lock: procs x threads processes and threads,
 * total / (procs x threads) tc_step_exclusive() iterations each on one handle of kind on name
 * (tc_options() clients); prints the numbers, asserts tc_assert_clean() and that every section
 * ran. Returns the number of acquisitions, total rounded down to a multiple of procs x threads. */
long tc_stress_exclusive(rh_server *srv, rlock_kind kind, const char *name, int procs, int threads,
                         long total);

/* Prints a step's failure (with rlock's last error) and returns TC_STEP_ERROR. */
int tc_step_fail(tc_worker *w, const char *what, int rc);

#endif
