/*
 * Dialling a socket within a deadline: TCP (IPv4 or IPv6, every address of the host in turn)
 * or a unix socket. The descriptor comes back non-blocking and close-on-exec; a TCP one with
 * TCP_NODELAY and keepalive. Used by conn.c only.
 */
#ifndef RLK_SOCK_H
#define RLK_SOCK_H

#include <stdint.h>

/* RLOCK_OK and *fd, or RLOCK_ECONN with a message naming host:port and the reason (refused,
 * unresolvable, no answer before deadline_ms). */
int rlk_sock_dial_tcp(const char *host, int port, int64_t deadline_ms, int *fd);
int rlk_sock_dial_unix(const char *path, int64_t deadline_ms, int *fd);

#endif
