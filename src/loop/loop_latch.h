/*
 * rlock_latch_await_async() and rlock_latch_count_down_async() (include/rlock_async.h): the
 * threaded latch's commands and channel (src/sync/latch.h) sent on the loop; waiting is
 * loop_wait.c's.
 */
#ifndef RLK_LOOP_LATCH_H
#define RLK_LOOP_LATCH_H

#include "loop_wait.h"

#endif
