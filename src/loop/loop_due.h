/*
 * One loop timer for all of a loop client's waiting operations: a min-heap of their due times,
 * the loop's timer armed for the earliest. A wait keeps a 24-byte rlk_loop_due instead of a loop
 * timer of its own (the libuv adapter's is about 180 bytes with its allocation).
 */
#ifndef RLK_LOOP_DUE_H
#define RLK_LOOP_DUE_H

#include <stdint.h>

#include "loop_client.h"

typedef struct rlk_loop_due rlk_loop_due;
struct rlk_loop_due {
    int64_t at;                      /* monotonic ms */
    uint32_t pos;                    /* 1 + its index in the heap, 0: not set */
    uint32_t seq;                    /* when it was set, so one firing round runs it at most once */
    void (*fire)(rlk_loop_due *due); /* runs on the loop, once per setting */
};

/* Makes room for one more due of lc (the client's timer is made with the first): RLOCK_OK or
 * RLOCK_ENOMEM. Each rlk_loop_due_add() is matched by one rlk_loop_due_del(). */
int rlk_loop_due_add(rlk_loop_client *lc);
/* Clears d and gives its room back. */
void rlk_loop_due_del(rlk_loop_client *lc, rlk_loop_due *d);
/* Sets d (set or not) to fire after delay_ms (0: at the loop's next turn); needs no memory. */
void rlk_loop_due_set(rlk_loop_client *lc, rlk_loop_due *d, int64_t delay_ms);
/* Stops d from firing (nothing when it is not set). */
void rlk_loop_due_clear(rlk_loop_client *lc, rlk_loop_due *d);
/* Frees the heap and the timer (the client's free, after every wait ended). */
void rlk_loop_due_free_all(rlk_loop_client *lc);

#endif
