/*
 * A client across fork() (client_fork.c; the generation counter is context.h's): the atfork
 * handlers' lock and list of clients, and the entry check that refreshes a client in the child.
 */
#ifndef RLK_CLIENT_FORK_H
#define RLK_CLIENT_FORK_H

#include "context.h"

/* Serializes the refresh of inherited objects (and the list of clients); held across fork(). */
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
