/*
 * A lock waiter that Redis records while it waits (the fair lock's queue, a read-write lock's
 * waiting writers): the heartbeat that keeps its entry, every third of waiter_timeout_ms, and the
 * leave after a give-up or at the client's free. loop_fair.c and loop_rw.c embed it.
 */
#ifndef RLK_LOOP_QUEUE_H
#define RLK_LOOP_QUEUE_H

#include "loop_lock_wait.h"

typedef struct rlk_loop_queue_op rlk_loop_queue_op;

/* Formats the leave of op's entry: its script in *script, the request in *cmd (malloc'd). */
typedef int (*rlk_loop_leave_format)(rlk_loop_queue_op *op, int *script, char **cmd, size_t *len);

struct rlk_loop_queue_op {
    rlk_loop_lock_op l; /* first: the lock's completion frees the record through it */
    rlk_loop_due hb;    /* the heartbeat, set while queued */
    int queued;         /* an attempt that may record the waiter ran */
    int hb_script;      /* the heartbeat: KEYS the lock's name, ARGV waiter_timeout_ms, the field */
    const char *what;   /* for the leave's warning: "fair lock '%s' ... the queue" */
};

/* The record of w. */
rlk_loop_queue_op *rlk_loop_queue_of(rlk_loop_wait *w);
/* Starts op (prepared, its table, hb_script and what set) as rlk_loop_lock_begin(). */
int rlk_loop_queue_begin(rlk_loop_client *lc, rlk_loop_queue_op *op, const rlock_cancel *cancel);
/* The heartbeat's next beat, a third of waiter_timeout_ms on. */
void rlk_loop_queue_beat(rlk_loop_queue_op *op);
/* The table entries: complete (the heartbeat ends), leave (after a give-up: the heartbeat
 * stops, a recorded waiter sends its leave and reports after the reply; 1 when sent) and
 * close_leave (at the free: the leave as the connection's last request; 1 when queued). */
void rlk_loop_queue_complete(rlk_loop_wait *w, int rc);
int rlk_loop_queue_leave(rlk_loop_wait *w, rlk_loop_leave_format format);
int rlk_loop_queue_close_leave(rlk_loop_wait *w, rlk_loop_leave_format format);

#endif
