#include "tc_stress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

/* Totals the children add to, in memory shared with the parent. */
typedef struct tc_totals {
    atomic_long errors, retries, iterations;
} tc_totals;

struct tc_stress {
    tc_stress_spec spec;
    tc_mx *mx;
    tc_totals *totals;
    pid_t *kids;
    int64_t t0;
    int proc; /* in a child: its index */
};

int tc_step_fail(tc_worker *w, const char *what, int rc)
{
    /* A run that goes wrong tends to go wrong thousands of times: the first few say why. */
    if (w->errors < 3) {
        fprintf(stderr, "stress proc %d thread %d: %s: %s: %s\n", w->proc, w->thread, what,
                rlock_strerror(rc), rlock_last_error());
    }
    return TC_STEP_ERROR;
}

static void *worker_main(void *p)
{
    tc_worker *w = p;
    const tc_stress_spec *spec = w->arg;
    int64_t end = spec->duration_ms > 0 ? rh_now_ms() + spec->duration_ms : 0;
    long max_retries = spec->max_retries > 0 ? spec->max_retries : 100000;
    long i = 0;
    while ((spec->iters == 0 || i < spec->iters) && (end == 0 || rh_now_ms() < end)) {
        int r = spec->step(w, i);
        if (r == TC_STEP_RETRY) {
            if (++w->retries > max_retries) {
                w->errors++;
                break;
            }
            continue;
        }
        w->errors += r != TC_STEP_OK;
        i++;
    }
    return (void *)(intptr_t)i;
}

/* The body of one forked child: its setup, its threads, its share of the totals. */
static int child_main(void *p)
{
    tc_stress *st = p;
    const tc_stress_spec *spec = &st->spec;
    void *ctx = spec->proc_init != NULL ? spec->proc_init(st->proc, spec->arg) : NULL;
    if (spec->proc_init != NULL && ctx == NULL) {
        return 2;
    }
    tc_worker *w = calloc((size_t)spec->threads, sizeof(*w));
    pthread_t *t = calloc((size_t)spec->threads, sizeof(*t));
    int started = 0;
    for (; w != NULL && t != NULL && started < spec->threads; started++) {
        tc_worker *x = &w[started];
        *x = (tc_worker){.proc = st->proc, .thread = started, .proc_ctx = ctx, .mx = st->mx};
        x->arg = (void *)spec;
        x->seed = (unsigned)(st->proc * 7919 + started * 104729 + (int)rh_now_ms());
        if (pthread_create(&t[started], NULL, worker_main, x) != 0) {
            break;
        }
    }
    int failed = started != spec->threads;
    for (int i = 0; i < started; i++) {
        void *done = NULL;
        pthread_join(t[i], &done);
        atomic_fetch_add(&st->totals->iterations, (long)(intptr_t)done);
        atomic_fetch_add(&st->totals->errors, w[i].errors);
        atomic_fetch_add(&st->totals->retries, w[i].retries);
    }
    if (spec->proc_fini != NULL) {
        spec->proc_fini(ctx);
    }
    free(w);
    free(t);
    return failed ? 2 : 0;
}

tc_stress *tc_stress_start(const tc_stress_spec *spec)
{
    tc_stress *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NULL;
    }
    st->spec = *spec;
    st->mx = tc_mx_new();
    st->totals =
        mmap(NULL, sizeof(tc_totals), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    st->kids = calloc((size_t)spec->procs, sizeof(pid_t));
    if (st->mx == NULL || st->totals == MAP_FAILED || st->kids == NULL) {
        st->totals = st->totals == MAP_FAILED ? NULL : st->totals;
        tc_stress_free(st);
        return NULL;
    }
    st->t0 = rh_now_ms();
    for (int p = 0; p < spec->procs; p++) {
        st->proc = p; /* the child's copy keeps the index it was forked with */
        st->kids[p] = rh_fork_child(child_main, st);
    }
    return st;
}

tc_mx *tc_stress_mx(tc_stress *st)
{
    return st->mx;
}

void tc_stress_wait(tc_stress *st, tc_stress_result *out)
{
    int64_t timeout = st->spec.timeout_ms > 0 ? st->spec.timeout_ms : 120000;
    memset(out, 0, sizeof(*out));
    for (int p = 0; p < st->spec.procs; p++) {
        int status = st->kids[p] > 0 ? rh_wait_child(st->kids[p], timeout) : -1;
        if (status != 0) {
            fprintf(stderr, "stress proc %d: exit status %d\n", p, status);
            out->failed_procs++;
        }
        st->kids[p] = 0;
    }
    out->took_ms = rh_now_ms() - st->t0;
    out->errors = atomic_load(&st->totals->errors);
    out->retries = atomic_load(&st->totals->retries);
    out->iterations = atomic_load(&st->totals->iterations);
}

void tc_stress_free(tc_stress *st)
{
    if (st == NULL) {
        return;
    }
    tc_mx_free(st->mx);
    if (st->totals != NULL) {
        munmap(st->totals, sizeof(tc_totals));
    }
    free(st->kids);
    free(st);
}

void *tc_proc_open(int proc, void *handles)
{
    (void)proc;
    const tc_handles *hs = handles;
    tc_proc *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    rlock_options o;
    tc_options(&o, hs->srv);
    if (hs->tune != NULL) {
        hs->tune(&o);
    }
    p->c = tc_client_try(&o);
    int ok = p->c != NULL;
    for (int i = 0; ok && i < hs->n; i++) {
        p->h[i] = rlock_open(p->c, hs->type[i], hs->name[i]);
        ok = p->h[i] != NULL;
    }
    if (!ok) {
        tc_proc_close(p);
        return NULL;
    }
    return p;
}

void tc_proc_close(void *proc_ctx)
{
    tc_proc *p = proc_ctx;
    for (int i = 0; i < TC_MAX_HANDLES; i++) {
        rlock_free(p->h[i]);
    }
    rlock_client_free(p->c);
    free(p);
}

void tc_stress_snapshot(tc_stress *st, const tc_stress_result *res, tc_stress_report *out)
{
    memset(out, 0, sizeof(*out));
    out->res = *res;
    out->violations = tc_mx_violations(st->mx);
    for (int s = 0; s < TC_MX_SLOTS; s++) {
        out->counter[s] = tc_mx_counter(st->mx, s);
        out->entries[s] = tc_mx_entries(st->mx, s);
        out->reads[s] = tc_mx_reads(st->mx, s);
        out->max_readers[s] = tc_mx_max_readers(st->mx, s);
    }
}

void tc_stress_run(const tc_stress_spec *spec, tc_stress_report *out)
{
    tc_stress *st = tc_stress_start(spec);
    if (st == NULL) {
        fail_msg("tc_stress_start: no shared memory");
    }
    tc_stress_result res;
    tc_stress_wait(st, &res);
    tc_stress_snapshot(st, &res, out);
    tc_stress_free(st);
}

void tc_stress_run_handles(tc_stress_spec *spec, tc_handles *hs, tc_stress_report *out)
{
    spec->proc_init = tc_proc_open;
    spec->proc_fini = tc_proc_close;
    spec->arg = hs;
    tc_stress_run(spec, out);
}

void tc_assert_clean(const tc_stress_report *r)
{
    assert_int_equal(r->res.failed_procs, 0);
    assert_int_equal(r->res.errors, 0);
    assert_int_equal(r->violations, 0);
    for (int s = 0; s < TC_MX_SLOTS; s++) {
        assert_int_equal(r->counter[s], r->entries[s]);
    }
}

int tc_step_exclusive(tc_worker *w, long i)
{
    rlock *l = ((tc_proc *)w->proc_ctx)->h[0];
    /* Alternate watchdog holds and leased holds: both paths of the grant. */
    int r = rlock_lock(l, i % 2 ? 10000 : -1);
    if (r != RLOCK_OK) {
        return tc_step_fail(w, "lock", r);
    }
    tc_mx_enter(w->mx, 0);
    tc_mx_leave(w->mx, 0);
    r = rlock_unlock(l);
    return r == RLOCK_OK ? TC_STEP_OK : tc_step_fail(w, "unlock", r);
}

long tc_stress_exclusive(rh_server *srv, rlock_kind kind, const char *name, int procs, int threads,
                         long total)
{
    tc_handles hs = {.srv = srv, .n = 1, .type = {kind}, .name = {name}};
    tc_stress_spec spec = {.procs = procs,
                           .threads = threads,
                           .iters = total / (procs * threads),
                           .proc_init = tc_proc_open,
                           .proc_fini = tc_proc_close,
                           .step = tc_step_exclusive,
                           .arg = &hs};
    total = spec.iters * procs * threads;
    tc_stress_report r;
    tc_stress_run(&spec, &r);
    print_message("%s: %d processes x %d threads: %ld acquisitions in %lld ms; counter %ld, "
                  "violations %ld\n",
                  name, procs, threads, total, (long long)r.res.took_ms, r.counter[0],
                  r.violations);
    tc_assert_clean(&r);
    assert_int_equal(r.entries[0], total);
    return total;
}
