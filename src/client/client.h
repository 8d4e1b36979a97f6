/*
 * The client layer: what client.c, client_version.c and client_fork.c offer the layers above
 * (reference counting, owner strings, the entry check across fork()). The client's state is
 * defined in context.h, which the layers below read instead of this header.
 */
#ifndef RLK_CLIENT_H
#define RLK_CLIENT_H

#include "context.h"

struct rlk_conn;

/* Writes "<uuid>:<thread-id>" of the calling thread into buf (RLK_OWNER_MAX bytes) and returns
 * its length. */
size_t rlk_owner(const rlock_client *c, uint64_t tid, char *buf);

/* Reads INFO server on conn (client_version.c): RLOCK_ENOTSUP naming the server and its version
 * when it cannot run script flags (Redis < 7.0); RLOCK_OK when it can, or when INFO is denied
 * (logged at INFO). A connection error is returned as it is. */
int rlk_client_check_version(rlock_client *c, struct rlk_conn *conn);

/* Reference counting: a handle keeps its client's memory alive after rlock_client_free(). */
void rlk_client_ref(rlock_client *c);
void rlk_client_unref(rlock_client *c);

/* ---- fork() (client_fork.c; the generation counter is context.h's) ----------------------
 * Serializes the refresh of inherited objects (and the list of clients); held across fork(). */
void rlk_fork_lock(void);
void rlk_fork_unlock(void);

/* The check of every public entry point that uses c: RLOCK_ECLOSED if freed; in the child of a
 * fork(), refreshes c first (new identity, the parent's connections abandoned, new threads).
 * RLOCK_OK, RLOCK_ECLOSED, or RLOCK_ENOMEM when the refresh cannot allocate (tried again by the
 * next call). */
int rlk_client_enter(rlock_client *c);
/* Adds c to the list that the atfork handlers walk (after its start) / takes it out (before its
 * stop). Registering also installs the handlers, once per process. */
void rlk_fork_register(rlock_client *c);
void rlk_fork_unregister(rlock_client *c);
/* In a child of fork(), frees the inherited pool, subscriber and watchdog of c without touching
 * the parent's threads or connections (c->pool etc. become NULL). No-op when c is current. */
void rlk_client_abandon_inherited(rlock_client *c);

#endif
