/*
 * The client object: options, identity, and the shared machinery every lock uses.
 */
#ifndef RLK_CLIENT_H
#define RLK_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "url.h"

typedef struct rlk_pool rlk_pool;
typedef struct rlk_pubsub rlk_pubsub;
typedef struct rlk_watchdog rlk_watchdog;

/* Longest owner string: 36-char UUID, ':', 20-digit thread id, ":write", NUL. */
#define RLK_OWNER_MAX 72

struct rlock_client {
    rlock_options opts; /* copy of the caller's options; opts.url points at url_copy */
    char *url_copy;
    rlk_url url;   /* parsed URL */
    char uuid[37]; /* client id, lower-case text form */
    rlk_pool *pool;
    rlk_pubsub *pubsub;
    rlk_watchdog *watchdog;
    atomic_int closed; /* set by rlock_client_free(); handles then return RLOCK_ECLOSED */
    atomic_int refs;   /* 1 for the client itself + 1 per open handle */
    atomic_int warned_nopublish; /* 1 once a refused PUBLISH was logged (release_reply.c) */
};

/* Writes "<uuid>:<thread-id>" of the calling thread into buf (RLK_OWNER_MAX bytes) and returns
 * its length. */
size_t rlk_owner(const rlock_client *c, uint64_t tid, char *buf);

/* Sends a formatted message to the user's log_fn if level is enabled. */
void rlk_log(const rlock_client *c, int level, const char *fmt, ...) RLK_PRINTF(3, 4);

/* Reference counting: a handle keeps its client's memory alive after rlock_client_free(). */
void rlk_client_ref(rlock_client *c);
void rlk_client_unref(rlock_client *c);

/* RLOCK_ECLOSED (with a message) if the client was freed, else RLOCK_OK. */
int rlk_client_check(const rlock_client *c);

#endif
