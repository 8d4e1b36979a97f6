/*
 * Replica-synced scripts on a loop client: WAIT <n> <replica_sync_timeout_ms> pipelined behind a
 * script on the data connection, the count of the master's replicas read with INFO replication
 * on the loop (topology/replica.h's rules), and the outcome handed to the script's callback.
 */
#ifndef RLK_LOOP_SYNC_H
#define RLK_LOOP_SYNC_H

#include "loop_client.h"

/* rlk_loop_eval() followed by the replica sync replica_sync asks for (none when it is 0, when
 * rlk_sync_suppress() is set, or when the master has no replicas). fn gets the script's reply
 * once the WAIT's came; while it runs, rlk_sync_short() tells whether fewer replicas than asked
 * acknowledged (a lost WAIT reply counts as none). RLOCK_OK or an error (fn never runs). */
int rlk_loop_eval_synced(rlk_loop_client *lc, int script, const char *cmd, size_t len,
                         rlk_lconn_reply_fn fn, void *arg);
/* 1 when a script on slot (-1: the data connection's master) would be synced now (replica_sync
 * and replicas to wait for, or their count not read yet), 0 when it goes plain. */
int rlk_loop_synced(rlk_loop_client *lc, int slot);

#endif
