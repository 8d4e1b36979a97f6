/*
 * Where a loop client's request goes in a Redis Cluster: the slot of a formatted script
 * request's first key, read back from the request bytes, so that every caller of
 * rlk_loop_eval() keeps formatting with the threaded builders (rlk_script_format()) and the
 * cluster side routes what they formatted; and, on a sharded pub/sub cluster client, the SHA
 * of the script's sharded variant written into those bytes.
 */
#ifndef RLK_LOOP_ROUTE_H
#define RLK_LOOP_ROUTE_H

#include <stddef.h>

/* The slot (0..16383, hash tags applied) of KEYS[1] of the EVAL or EVALSHA request of len
 * bytes at cmd (RESP, as rlk_script_format() writes it); -1 for a request with no key, of
 * another command, or not well formed (the request then goes to any node, as a threaded
 * cluster client sends a request without a key). */
int rlk_loop_request_slot(const char *cmd, size_t len);
/* Writes sha (40 bytes) over the script SHA of the EVALSHA request of len bytes at cmd, so that
 * a request formatted for a script runs its sharded pub/sub variant (same keys and arguments):
 * 0, or -1 (nothing written) when the bytes are not an EVALSHA with a 40-byte SHA. */
int rlk_loop_request_set_sha(char *cmd, size_t len, const char *sha);

#endif
