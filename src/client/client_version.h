/*
 * The server's version check at client creation (client_version.c).
 */
#ifndef RLK_CLIENT_VERSION_H
#define RLK_CLIENT_VERSION_H

#include "context.h"

struct rlk_conn;

/* Reads INFO server on conn: RLOCK_ENOTSUP naming the server and its version
 * when it cannot run script flags (Redis < 7.0); RLOCK_OK when it can, or when INFO is denied
 * (logged at INFO). A connection error is returned as it is. */
int rlk_client_check_version(rlock_client *c, struct rlk_conn *conn);

#endif
