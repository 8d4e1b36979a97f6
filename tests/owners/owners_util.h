/*
 * What the owner and cancellation tests share: every lock type and both groups as one "subject"
 * (a handle, and the handle another owner uses to challenge it), made on a test's server.
 */
#ifndef RLOCK_TESTS_OWNERS_UTIL_H
#define RLOCK_TESTS_OWNERS_UTIL_H

#include "rlock.h"
#include "tc_redis.h"

/* The subjects: the five single-key kinds, a multi-lock of two reentrant locks, a RedLock of
 * three reentrant locks (three clients of one server). */
enum { OW_REENTRANT, OW_SPIN, OW_FAIR, OW_READ, OW_WRITE, OW_MULTI, OW_REDLOCK, OW_SUBJECTS };

typedef struct ow_subject {
    int which;
    char name[64];
    rlock *l;               /* the subject */
    rlock *rival;           /* what a second owner takes to be kept out (the write side for READ) */
    rlock *member[3];       /* a group's members (rival: the group itself) */
    rlock_client *extra[2]; /* the RedLock's second and third clients */
    size_t n;
} ow_subject;

/* Pool size of the clients ow_open() makes (a RedLock's second and third); 0: tc_options()'s. */
extern int ow_pool_size;

const char *ow_label(int which);
/* Opens subject which on c (server s) under a name made of prefix; a RedLock's other clients get
 * watchdog_ms (<= 0: the default). */
void ow_open(ow_subject *sj, int which, rlock_client *c, rh_server *s, const char *prefix,
             int64_t watchdog_ms);
void ow_close(ow_subject *sj);
/* The keys a subject's lock lives in on Redis (the members' for a group): 1 if any exists. */
int ow_any_key(const ow_subject *sj, rh_server *s);
/* The lock hash of the subject's (first member's) name. */
const char *ow_key(const ow_subject *sj);

#endif
