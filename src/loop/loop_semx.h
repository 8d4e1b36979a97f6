/*
 * The semaphore's and latch's single-request calls on a loop client (loop_semx.c): setting,
 * adding, draining and reading permits and leases, and the latch's count, try-set and delete,
 * each one script (or GET) with the threaded calls' builders and decoders.
 */
#ifndef RLK_LOOP_SEMX_H
#define RLK_LOOP_SEMX_H

#include "loop_client.h"

#endif
