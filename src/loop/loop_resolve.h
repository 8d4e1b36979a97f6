/*
 * A host name looked up for a loop connection without blocking the loop: getaddrinfo() runs on
 * a short-lived helper thread, which ends with the lookup and posts its answer through a socket
 * pair the loop watches. Numeric addresses never get here (loop_conn.c converts them at once).
 */
#ifndef RLK_LOOP_RESOLVE_H
#define RLK_LOOP_RESOLVE_H

#include "rlock_async.h"

struct addrinfo;
typedef struct rlk_lresolve rlk_lresolve;

/* The answer, on the loop: the TCP addresses (the callee freeaddrinfo()s them) or NULL and
 * RLOCK_ECONN with a message. The lookup is over when it runs; it never runs after cancel. */
typedef void (*rlk_lresolve_fn)(void *arg, struct addrinfo *ai, int err);

/* Starts looking up host:port. RLOCK_OK and *out; RLOCK_ENOMEM; RLOCK_ECONN (no socket pair or
 * thread could be made). fn never runs inside this call. */
int rlk_lresolve_start(const rlock_loop *loop, const char *host, int port, rlk_lresolve_fn fn,
                       void *arg, rlk_lresolve **out);
/* Stops waiting for the answer (the thread finishes its lookup and frees it); fn never runs. */
void rlk_lresolve_cancel(rlk_lresolve *r);

#endif
