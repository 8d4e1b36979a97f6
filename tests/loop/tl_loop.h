/*
 * The loop tests' loop, one implementation per adapter (loop_uv.c: libuv, loop_event.c:
 * libevent), each compiled apart from the library's private include path (which has a
 * semaphore.h of its own that would hide the system's from uv.h), as a user's program would be:
 * public headers and the adapter only.
 */
#ifndef RLOCK_TESTS_TL_LOOP_H
#define RLOCK_TESTS_TL_LOOP_H

#include "rlock_async.h"

typedef struct tu_loop tu_loop;

/* A loop with a ticking timer, so that a run never sleeps past its deadline. */
tu_loop *tu_loop_new(void);
/* The adapter's client constructor on the loop. */
int tu_client_new(tu_loop *l, const rlock_options *opts, rlock_client **out);
/* Runs the loop until *calls >= want or ms passed; 1 if it got there. */
int tu_run_until(tu_loop *l, const int *calls, int want, int64_t ms);
/* Calls fn(arg) once from the loop after ms. */
void tu_after(tu_loop *l, int64_t ms, void (*fn)(void *), void *arg);
/* Stops the tick, runs the loop until every handle is closed and closes it: 0, or non-zero
 * when a watcher or timer stayed active (a client that did not free one). */
int tu_loop_close(tu_loop *l);

#endif
