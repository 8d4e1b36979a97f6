/*
 * The read-write lock's constructor (lock_rw.c).
 */
#ifndef RLK_LOCK_RW_H
#define RLK_LOCK_RW_H

#include "lock.h"

rlock *rlk_rw_open(rlock_client *c, rlock_kind kind, const char *name);

/* The requests of a read or write handle's calls for a loop client (src/loop), formatted as
 * rlk_script_format() does (malloc()ed bytes in *cmd), *script naming the script they call:
 * the attempt of a's side (rlk_rw_check_acquire_reply() decodes its reply) and the release of
 * one hold. */
int rlk_rw_attempt_format(rlk_acq *a, int *script, char **cmd, size_t *len);
int rlk_rw_release_format(rlk_acq *a, int *script, char **cmd, size_t *len);
/* 1 when a's attempts record a waiting writer in the waiting-writers zset (a write handle of a
 * writer-preferring client that may wait): it then keeps its entry alive with
 * rw_writer_heartbeat.lua and leaves with the request of rlk_rw_writer_leave_format(). */
int rlk_rw_writer_queues(const rlk_acq *a);
int rlk_rw_writer_leave_format(rlk_acq *a, char **cmd, size_t *len);

#endif
