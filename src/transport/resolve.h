/*
 * Name resolution within a deadline. getaddrinfo() has no timeout of its own: a slow or silent
 * DNS server holds it for the resolver's timeout times its attempts, per search domain, which
 * is seconds to minutes. rlock bounds every dial by connect_timeout_ms, so a numeric address is
 * converted without any lookup, and a name is looked up on a helper thread that the caller
 * stops waiting for at the deadline. Used by sock.c only.
 */
#ifndef RLK_RESOLVE_H
#define RLK_RESOLVE_H

#include <stdint.h>

struct addrinfo;

/* The TCP addresses of host:port (freeaddrinfo() them). RLOCK_OK and *res; RLOCK_ECONN naming
 * where (host:port, as the caller shows it) when the name does not resolve or no answer came
 * before deadline_ms (monotonic); RLOCK_ENOMEM. A lookup given up on finishes on its thread,
 * which then frees what it got. */
int rlk_resolve(const char *host, int port, const char *where, int64_t deadline_ms,
                struct addrinfo **res);

#endif
