/*
 * Cancellation tokens (rlock_cancel): a fired flag that a signal handler may set, and the way a
 * sleeping waiter learns of it. Firing writes one byte to a process-wide pipe; the cancel thread
 * reads it and calls the wake function of every wait registered with a fired token, which
 * signals the condition variable that wait sleeps on. No waiter polls.
 */
#ifndef RLK_CANCEL_H
#define RLK_CANCEL_H

#include <stdint.h>

#include "util.h"

/* A wait's registration with a token, on the waiter's stack. While registered, the token's
 * firing calls wake(arg) once, from the cancel thread, with no library mutex held; wake takes
 * the waiter's mutex and signals its condition variable. The fields are the cancel module's. */
typedef struct rlk_cancel_watch {
    struct rlk_cancel_watch *next;
    struct rlk_cancel_watch *prev;
    const rlock_cancel *token;
    void (*wake)(void *arg);
    void *arg;
    int woken; /* wake was called (or is being called: busy) */
    int busy;  /* the cancel thread is inside wake: end must wait */
} rlk_cancel_watch;

/* 1 if token is not NULL and fired. A relaxed-cost atomic load: cheap in any loop. */
int rlk_cancel_is_fired(const rlock_cancel *token);

/* RLOCK_ECANCELED with a message naming what (e.g. "lock 'x'") if token fired, else RLOCK_OK. */
int rlk_cancel_check(const rlock_cancel *token, const char *what, const char *name);

/* Registers w for token (NULL token: does nothing and returns RLOCK_OK). Call it before the
 * waiter's last check of rlk_cancel_is_fired() under its own mutex, and never with that mutex
 * held: a firing after the check then reaches wake, which takes the mutex. RLOCK_ECONN if the
 * cancel thread could not be started (a fork child out of descriptors or threads). */
int rlk_cancel_watch_begin(rlk_cancel_watch *w, const rlock_cancel *token, void (*wake)(void *),
                           void *arg);
/* Unregisters w, waiting for a wake in progress to return; never call it with the mutex that
 * wake takes held. After it returns, wake is not called again. No-op for a NULL-token watch. */
void rlk_cancel_watch_end(rlk_cancel_watch *w);

/* Sleeps until deadline (monotonic ms, INT64_MAX = none) or until token fires. Returns 1 if the
 * token fired (before or during the sleep), 0 when the deadline passed. With token NULL it is a
 * plain sleep. For the pauses of a wait (back-off after a connection failure, spin lock). */
int rlk_cancel_sleep(const rlock_cancel *token, int64_t deadline);

/* For tests: how many times the cancel thread woke up to look at the registered waits. */
uint64_t rlk_cancel_thread_rounds(void);

#endif
