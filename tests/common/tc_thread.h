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

#endif
