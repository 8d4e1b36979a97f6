/*
 * A blocking call (a lock, an acquire, an await) run on a thread of its own, so that the test
 * thread can act while it waits and check afterwards what it returned and when. Part of the
 * rlock_testcommon library.
 */
#ifndef RLOCK_TESTS_TC_THREAD_H
#define RLOCK_TESTS_TC_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rlock.h"

/* The result of a call that has not returned yet (no rlock call returns it). */
#define TC_BG_RUNNING 99

typedef struct tc_bg {
    int (*call)(void *arg);
    void *arg;
    atomic_int result; /* TC_BG_RUNNING until call(arg) returned */
    int64_t done_at;   /* rh_now_ms() when it returned; read it after tc_bg_join() */
    pthread_t thread;
} tc_bg;

/* Starts call(arg) on a new thread; fails the running test when no thread can be made. */
void tc_bg_start(tc_bg *b, int (*call)(void *arg), void *arg);

/* Waits for the call to return and gives its result. */
int tc_bg_join(tc_bg *b);

/* Runs run() on n threads, thread i given (char *)args + i * size (an array of the threads' own
 * structs), and waits for all of them; stops starting threads at the first that cannot be made.
 * Returns how many ran: n when all did. Fails no cmocka test, so child processes use it too. */
int tc_threads_run(int n, void *(*run)(void *arg), void *args, size_t size);

/* A thread that takes a lock and holds it: the waiter, holder or contender that many tests put
 * next to the test thread. It calls rlock_lock(l, lease_ms) when wait_ms < 0, otherwise
 * rlock_try_lock(l, wait_ms, lease_ms); when it got the lock it holds it for hold_ms (until
 * tc_holder_release() when hold_ms < 0) and unlocks. */
typedef struct tc_holder {
    rlock *l;
    int64_t wait_ms, lease_ms, hold_ms;
    atomic_int *order;          /* optional: the holder takes the next number of it as its place */
    int rc;                     /* the lock call's result */
    int unlock_rc;              /* the unlock's (RLOCK_OK when the lock was not taken) */
    int place;                  /* with order: the holders' rank in getting the lock (-1 before) */
    uint64_t token;             /* rlock_token() of its hold (0 when the lock was not taken) */
    int64_t started_at, got_at; /* rh_now_ms() before the lock call and when it returned */
    atomic_int got;             /* 1 once the lock call returned */
    atomic_int release;
    pthread_t thread;
} tc_holder;

/* Starts h's thread on l with the given wait, lease and hold (every field of h is set). Fails
 * the running test when no thread can be made. */
void tc_holder_start(tc_holder *h, rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t hold_ms);

/* tc_holder_start() with h->order = order: h->place tells how many holders of the same order
 * got their lock before h. */
void tc_holder_start_ranked(tc_holder *h, atomic_int *order, rlock *l, int64_t wait_ms,
                            int64_t lease_ms, int64_t hold_ms);

/* Waits up to ms for the lock call to return: its result, or TC_BG_RUNNING if it has not. */
int tc_holder_wait(tc_holder *h, int64_t ms);

/* Lets a holder with hold_ms < 0 unlock, waits for its thread and returns the lock call's
 * result when it failed, else the unlock's. */
int tc_holder_join(tc_holder *h);

/* Direct grants (issue 18): kills every pub/sub connection of srv, releases h (which holds the
 * lock name, held once, with token token0) and asserts that w, waiting for that lock, still
 * returns acquired, with the next token and one hold count: the lost grant message is found by
 * the waiter's next attempt. */
struct rh_server;
void tc_assert_grant_survives_pubsub_kill(struct rh_server *srv, rlock *h, const char *name,
                                          tc_holder *w, uint64_t token0);

/* Starts the holder and joins it: the whole call on another thread (another owner). */
int tc_holder_run(tc_holder *h, rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t hold_ms);

#endif
