/*
 * The loop tests' libuv side, compiled apart from the library's private include path (which
 * has a semaphore.h of its own that would hide the system's from uv.h), as a user's program
 * would be: public headers and include/rlock/libuv.h only.
 */
#ifndef RLOCK_TESTS_LOOP_UV_H
#define RLOCK_TESTS_LOOP_UV_H

#include "rlock_async.h"

typedef struct tu_loop tu_loop;

/* A libuv loop with a ticking timer, so that a run never sleeps past its deadline. */
tu_loop *tu_loop_new(void);
/* rlock_libuv_client_new() on the loop. */
int tu_client_new(tu_loop *l, const rlock_options *opts, rlock_client **out);
/* Runs the loop until *calls >= want or ms passed; 1 if it got there. */
int tu_run_until(tu_loop *l, const int *calls, int want, int64_t ms);
/* Calls fn(arg) once from the loop after ms. */
void tu_after(tu_loop *l, int64_t ms, void (*fn)(void *), void *arg);
/* Stops the tick, runs the loop until every handle is closed and closes it: 0, or libuv's
 * error when a handle stayed open (a client that did not free a watcher or timer). */
int tu_loop_close(tu_loop *l);

#endif
