/*
 * Dialling and closing a connection (conn_open.c): the client's data node or an endpoint, with
 * socket, TLS, AUTH and SELECT bounded by one deadline; close, and abandon after fork().
 */
#ifndef RLK_CONN_OPEN_H
#define RLK_CONN_OPEN_H

#include "conn.h"

/* The client's data node: its URL, or the current master of a Sentinel deployment, copied into
 * host (RLK_HOST_MAX bytes) because a failover may change it while the caller dials. */
void rlk_client_endpoint(const rlock_client *c, rlk_endpoint *ep, char *host);

/* Dials the client's data node (its URL; the current master of a Sentinel deployment): connect, TLS
 * handshake, AUTH and SELECT together are bounded by deadline_ms (a monotonic time, rlk_now_ms()).
 * Reads and writes afterwards time out after io_timeout_ms (> 0). RLOCK_OK, RLOCK_ECONN,
 * RLOCK_ETLS, RLOCK_EAUTH or RLOCK_ENOMEM. */
int rlk_conn_open(const rlock_client *c, int64_t deadline_ms, int64_t io_timeout_ms,
                  rlk_conn **out);
/* Dials ep (instead of the client's URL); same bounds and errors as rlk_conn_open. */
int rlk_conn_open_at(const rlock_client *c, const rlk_endpoint *ep, int64_t deadline_ms,
                     int64_t io_timeout_ms, rlk_conn **out);
/* Closes (a TLS connection that is not broken says close_notify first, without waiting). */
void rlk_conn_close(rlk_conn *conn);
/* Frees a connection inherited across fork(): closes the fd, frees memory, writes NOTHING
 * (no QUIT, no TLS close_notify). */
void rlk_conn_abandon(rlk_conn *conn);

#endif
