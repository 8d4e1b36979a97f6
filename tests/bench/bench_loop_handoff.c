/*
 * Scenario loop_handoff: two processes (forked before either has a client), each a libuv loop
 * with one loop client and one owner, take turns on one lock. The holder keeps it 2 ms (so the
 * other one is asleep on the lock's channel), releases, and asks again 1 ms after its unlock's
 * reply (so the waiter, not the holder, takes it next). A hand-off is the time from the
 * holder's unlock reply to the waiter's done, in PING round trips measured in the same run;
 * the goal is p50 <= 1.5 RTT. Both processes write their times (CLOCK_MONOTONIC) into
 * a shared mapping, indexed by the acquisition's turn.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_loop.h"

#define H_HOLD_MS  2
#define H_AGAIN_MS 1
#define H_WARMUP   4

typedef struct h_turn {
    int64_t acq, rel; /* ns: the acquirer's done, its unlock's reply */
    int who;          /* 0 the parent, 1 the child */
} h_turn;

typedef struct h_shared {
    int turns;  /* acquisitions to make in all */
    int next;   /* the next acquisition's turn (atomic) */
    int go;     /* set by the parent once both processes have their client */
    int ready;  /* processes with a client (atomic) */
    int failed; /* a process saw an error */
    h_turn t[]; /* by turn: turns + 2 of them (the last two end the run) */
} h_shared;

typedef struct h_proc {
    bench_uv loop;
    rlock_client *c;
    rlock *lock;
    rlock_owner *owner;
    h_shared *sh;
    uv_timer_t hold, again;
    int turn, finished, who;
} h_proc;

static void h_lock(h_proc *p);

static void h_again(uv_timer_t *t)
{
    h_lock(t->data);
}

static void h_unlocked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    h_proc *p = arg;
    p->sh->t[p->turn].rel = bench_now_ns();
    if (rc != RLOCK_OK) {
        __atomic_store_n(&p->sh->failed, 1, __ATOMIC_SEQ_CST);
    }
    if (p->turn >= p->sh->turns || rc != RLOCK_OK) {
        p->finished = 1;
    } else {
        uv_timer_start(&p->again, h_again, H_AGAIN_MS, 0);
    }
}

static void h_release(uv_timer_t *t)
{
    h_proc *p = t->data;
    if (rlock_unlock_async(p->lock, p->owner, h_unlocked, p) != RLOCK_OK) {
        __atomic_store_n(&p->sh->failed, 1, __ATOMIC_SEQ_CST);
        p->finished = 1;
    }
}

static void h_locked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    int64_t now = bench_now_ns();
    h_proc *p = arg;
    if (rc != RLOCK_OK) {
        __atomic_store_n(&p->sh->failed, 1, __ATOMIC_SEQ_CST);
        p->finished = 1;
        return;
    }
    p->turn = __atomic_fetch_add(&p->sh->next, 1, __ATOMIC_SEQ_CST);
    p->sh->t[p->turn].acq = now;
    p->sh->t[p->turn].who = p->who;
    uv_timer_start(&p->hold, h_release, H_HOLD_MS, 0);
}

static void h_lock(h_proc *p)
{
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = p->owner;
    a.lease_ms = 30000;
    a.wait_ms = 10000;
    if (rlock_lock_async(p->lock, &a, h_locked, p) != RLOCK_OK) {
        __atomic_store_n(&p->sh->failed, 1, __ATOMIC_SEQ_CST);
        p->finished = 1;
    }
}

/* One process's part: its loop, client and owner, then turns on the lock until the last. */
static int h_run(h_shared *sh, int who)
{
    static h_proc p;
    memset(&p, 0, sizeof(p));
    p.sh = sh;
    p.who = who;
    bench_uv_init(&p.loop);
    p.c = bench_uv_client(&p.loop, 0);
    p.lock = rlock_open(p.c, RLOCK_REENTRANT, "bench_lh");
    if (p.lock == NULL || rlock_owner_new(p.c, &p.owner) != RLOCK_OK) {
        bench_die("loop_handoff: %s", rlock_last_error());
    }
    uv_timer_init(&p.loop.uv, &p.hold);
    uv_timer_init(&p.loop.uv, &p.again);
    p.hold.data = p.again.data = &p;
    __atomic_fetch_add(&sh->ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST)) {
        bench_sleep_us(1000);
    }
    h_lock(&p);
    int64_t end = bench_now_ns() + (int64_t)(sh->turns * 20 + 10000) * 1000000;
    while (!p.finished && bench_now_ns() < end) {
        (void)uv_run(&p.loop.uv, UV_RUN_ONCE);
    }
    int ok = p.finished && !__atomic_load_n(&sh->failed, __ATOMIC_SEQ_CST);
    uv_close((uv_handle_t *)&p.hold, NULL);
    uv_close((uv_handle_t *)&p.again, NULL);
    rlock_free(p.lock);
    rlock_owner_free(p.owner);
    bench_uv_client_free(&p.loop, p.c);
    bench_uv_close(&p.loop);
    return ok ? 0 : 1;
}

/* Hand-offs in us: turns whose holder differs from the previous turn's (the process that
 * released does not take the lock straight back), after a few turns of warm-up. */
static int h_samples(const h_shared *sh, bench_samples *out)
{
    int barged = 0;
    for (int k = H_WARMUP; k + 1 < sh->turns; k++) {
        if (sh->t[k + 1].who == sh->t[k].who) {
            barged++;
            continue;
        }
        bench_samples_add(out, (double)(sh->t[k + 1].acq - sh->t[k].rel) / 1000.0);
    }
    return barged;
}

/* Forks the child (it runs its part and leaves with _exit), runs the parent's part, waits. */
static void h_two(h_shared *sh)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        bench_die("fork failed");
    }
    if (pid == 0) {
        _exit(h_run(sh, 1));
    }
    while (__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) < 1) {
        bench_sleep_us(1000);
    }
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    int rc = h_run(sh, 0), st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || rc != 0) {
        bench_die("loop_handoff: a process failed (%s)", rlock_last_error());
    }
}

int bench_loop_handoff(void)
{
    int turns = (int)(600 * g_cfg.scale);
    turns = turns < 40 ? 40 : turns;
    size_t size = sizeof(h_shared) + (size_t)(turns + 2) * sizeof(h_turn);
    h_shared *sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        bench_die("mmap failed");
    }
    memset(sh, 0, size);
    sh->turns = turns;
    double rtt = bench_loop_rtt_us(300);
    h_two(sh);
    bench_samples s = {0};
    int barged = h_samples(sh, &s);
    double p50 = bench_pct(&s, 50) / rtt, p99 = bench_pct(&s, 99) / rtt;
    bench_row("loop_handoff", "PING RTT p50 (us)", rtt, rtt, NULL, -1);
    bench_row("loop_handoff", "hand-off p50 (RTTs)", NAN, p50, "<= 1.5 RTT", p50 <= 1.5);
    bench_row("loop_handoff", "hand-off p99 (RTTs)", NAN, p99, NULL, -1);
    bench_row("loop_handoff", "hand-off p50 (us)", NAN, p50 * rtt, NULL, -1);
    bench_json j;
    bench_json_begin(&j, "loop_handoff");
    BENCH_JSON_NUMS(&j, {"handoffs", (double)s.n}, {"retaken_by_releaser", barged},
                    {"rtt_p50_us", rtt}, {"handoff_p50_rtt", p50}, {"handoff_p99_rtt", p99});
    bench_json_end(&j);
    bench_samples_free(&s);
    munmap(sh, size);
    return 0;
}
