/*
 * A loop client's state (rlock_client.loop): its data and pub/sub connections on the caller's
 * loop, the channels its waiters listen on, its pending operations, the self-pipe that carries
 * cancellations to the loop, and the holds its watchdog renews (loop_watchdog.c). Everything
 * here runs on the loop's thread, except the cancel watch's write to the pipe.
 */
#ifndef RLK_LOOP_CLIENT_H
#define RLK_LOOP_CLIENT_H

#include <stdlib.h>

#include "cancel.h"
#include "client.h"
#include "loop_conn.h"

typedef struct rlk_loop_client rlk_loop_client;
typedef struct rlk_loop_op rlk_loop_op;
typedef struct rlk_loop_chan rlk_loop_chan;
typedef struct rlk_loop_sentinel rlk_loop_sentinel;
typedef struct rlk_loop_cluster rlk_loop_cluster;
typedef struct rlk_loop_shard rlk_loop_shard;

/* Why an operation is woken (rlk_loop_op_type.wake). */
enum {
    RLK_LOOP_MESSAGE = 1, /* a message on its channel */
    RLK_LOOP_SUBSCRIBED,  /* its channel's subscription is confirmed */
    RLK_LOOP_CANCEL,      /* its token fired */
    RLK_LOOP_CLOSE,       /* the client is being freed: complete with RLOCK_ECLOSED */
};

/* What a kind of pending operation does, shared by all of its operations. */
typedef struct rlk_loop_op_type {
    void (*wake)(rlk_loop_op *op, int why);
    /* Optional: the client is being freed, its connections still open: queue a last request
     * with no reply (a queued waiter's leave) and return 1, else 0. */
    int (*closing)(rlk_loop_op *op);
    /* Optional: a message on the wake channel of its channel (rlk_loop_join_named()): 1 when
     * it was meant for op (op took it), 0 when not. */
    int (*told)(rlk_loop_op *op, const char *msg, size_t len);
} rlk_loop_op_type;

/* A wake channel's message that no waiter of its channel took (the waiter is gone or between
 * two states), with the key its channel was joined with: 1 when it was dealt with, 0 to wake
 * every waiter of the channel. */
typedef int (*rlk_loop_unclaimed_fn)(rlk_loop_client *lc, const char *key, size_t key_len,
                                     const char *msg, size_t len);

/* A pending operation, embedded in the record of the module that runs it (loop_lock.c). It is
 * on the client's list from rlk_loop_op_add() to rlk_loop_op_remove(). */
struct rlk_loop_op {
    rlk_loop_op *prev, *next;   /* the client's pending operations */
    rlk_loop_op *cprev, *cnext; /* its channel's waiters */
    rlk_loop_chan *chan;        /* the channel it listens on, NULL: none */
    rlk_loop_client *lc;
    const rlock_cancel *cancel;
    rlk_cancel_watch *watch; /* cancel's watch, NULL without a token */
    int cancel_seen;         /* RLK_LOOP_CANCEL was delivered */
    int mark;                /* to be woken in the channel's current round (loop_client.c) */
    const rlk_loop_op_type *type;
};

/* A channel some waiter listens on. sent/seen count SUBSCRIBE requests and their
 * confirmations, usent/useen the same for UNSUBSCRIBE: the subscription is live when wanted and
 * every SUBSCRIBE was confirmed; the record goes when nobody wants it and nothing is pending.
 * In sharded pub/sub the verbs are SSUBSCRIBE and SUNSUBSCRIBE and the counts are those sent to
 * the channel's shard (a move to another master starts them again). */
struct rlk_loop_chan {
    rlk_loop_chan *next;
    rlk_loop_op *waiters;
    rlk_loop_shard *shard; /* sharded pub/sub: the master it is subscribed on, NULL: none yet */
    int slot;              /* its cluster slot (sharded pub/sub) */
    int wanted;
    int waking; /* loop_chan_wake() walks its waiters: it must not be freed meanwhile */
    int sent, seen, usent, useen;
    /* A named channel's (rlk_loop_join_named()): name is a pattern, the key follows it in the
     * same allocation, the wake channel is "<wake_prefix>:{key}:<uuid>", unclaimed its
     * messages' last taker; wake_prefix NULL: a plain channel. Classic pub/sub only. */
    const char *wake_prefix;
    size_t key_len;
    rlk_loop_unclaimed_fn unclaimed;
    size_t len;
    char name[];
};

/* A hold a loop owner took (the loop keeps its own records: count, token, watchdog), by lock
 * name and owner: the record outlives the handle it was taken through. */
typedef struct rlk_loop_hold {
    struct rlk_loop_hold *prev, *next;
    char *name;
    size_t name_len;
    uint64_t tid;
    int count;
    uint64_t token;
    int64_t lease_ms;   /* the latest acquire's lease (a release keeps it for the holds left) */
    int kind;           /* the rlock_metric_kind it is reported as (the kind of its first grant) */
    int side;           /* RLK_LOOP_HASH, _READ or _WRITE (loop_watchdog.h): its renewal script */
    int64_t obs_t0;     /* when the hold began (rlk_obs_now_ns()), for its end's report */
    int watchdog;       /* renewed by the loop's watchdog */
    int lost;           /* 1: found gone by a renewal (reported); the next release says ELOST */
    int64_t due_ms;     /* its next renewal (monotonic ms) */
    int64_t renewed_ms; /* when the master last renewed it (monotonic ms) */
    char field[RLK_OWNER_MAX];
    size_t field_len;
    /* The hold's own loss callback (rlock_lock_args.on_lost; a re-entry's replaces it), called
     * after the client-wide one with the handle it was taken through; NULL: none. */
    void (*on_lost)(rlock *lock, void *user_data);
    void *lost_ud;
    rlock *lost_lock;
    /* A leased permit renewed by the watchdog (loop_permit.c): name is its {name}:timeout key,
     * field its 16-byte id, label the semaphore's name; renewed by sem_renew_leased.lua. */
    int permit;
    char *label;
} rlk_loop_hold;

/* The calls loop_shard.c and loop_cluster.c make back up into loop_client.c's channel
 * bookkeeping and loop_shard.c's subscriptions, through pointers that loop_client.c sets, so that
 * both files stay below it (src_deps: no call cycle). shards_check: the shard channels follow a
 * new slot map or a MOVED (loop_shard.h). */
typedef struct rlk_loop_up {
    void (*push)(rlk_loop_client *lc, rlk_loop_shard *sh, redisReply *rep);
    int (*chan_send)(rlk_loop_client *lc, rlk_loop_chan *ch, int on);
    void (*chan_drop_if_idle)(rlk_loop_client *lc, rlk_loop_chan *ch);
    void (*sub_retry)(rlk_loop_client *lc);
    void (*shards_check)(rlk_loop_client *lc);
} rlk_loop_up;

struct rlk_loop_client {
    const rlk_loop_up *up;
    rlock_client *c;
    rlock_loop loop;
    rlk_lconn *data;         /* NULL until needed, and after a failure until needed again */
    int64_t data_backoff_ms; /* the wait after the last dial that got no reply (0: none) */
    int64_t data_retry_at;   /* monotonic ms before which no data dial is made */
    int data_dialled;        /* a data connection was dialled before (later ones count) */
    rlk_lconn *sub;          /* the pub/sub connection, NULL while no channel is wanted */
    rlk_loop_shard *shards;  /* sharded pub/sub: a pub/sub connection per master (loop_shard.c) */
    void *sub_timer;         /* redials the pub/sub connection after it broke */
    int64_t sub_backoff_ms;  /* the next redial's delay: 0 after a confirmation, then doubling */
    rlk_loop_op *ops;
    rlk_loop_chan *chans;
    rlk_loop_hold *holds;        /* loop_watchdog.c's */
    void *wd_timer;              /* loop_watchdog.c's, NULL until a watchdog hold exists */
    rlk_loop_sentinel *sentinel; /* loop_sentinel.c's, NULL unless the URL names Sentinels */
    rlk_loop_cluster *cluster;   /* loop_cluster.c's, NULL unless the URL names a cluster */
    int pipe_r, pipe_w;          /* the self-pipe a fired token's watch writes to */
    void *pipe_io;
    /* loop_due.c's: the waits' due times (a min-heap), room reserved for due_room of them, one
     * loop timer armed for the earliest (due_armed), and the count of settings. */
    struct rlk_loop_due **dues;
    uint32_t ndue, due_cap, due_room, due_seq;
    void *due_timer;
    int64_t due_armed;
    /* This file's loop callbacks running now, and whether a done inside one freed the client:
     * the struct then outlives the free until the outermost of them returns. */
    int depth;
    int freed;
};

/* The loop state of c, NULL for a threaded client. */
rlk_loop_client *rlk_loop_of(const rlock_client *c);
/* The data connection, dialled when there is none (RLOCK_OK and *out, or an error). A cluster
 * client has one per master: there it is RLOCK_EINVAL (rlk_loop_command() routes). */
int rlk_loop_data(rlk_loop_client *lc, rlk_lconn **out);
/* Sends a command on the data connection, or on a cluster on the master of slot (a key's slot,
 * -1: any node). */
int rlk_loop_command(rlk_loop_client *lc, int slot, int argc, const char **argv, const size_t *lens,
                     rlk_lconn_reply_fn fn, void *arg);
/* 1 when a last request (rlk_loop_send_last()) can go out now. */
int rlk_loop_can_send_last(const rlk_loop_client *lc);
/* Sends an EVALSHA request of script (cmd, len) on the data connection (on a cluster, on the
 * master of its first key's slot, following MOVED and ASK); a NOSCRIPT reply loads the script
 * and resends once, so fn sees the script's own reply. */
int rlk_loop_eval(rlk_loop_client *lc, int script, const char *cmd, size_t len,
                  rlk_lconn_reply_fn fn, void *arg);

/* The client's master changed (Sentinel: loop_sentinel.c recorded it) or, with err < 0, none
 * was found: a parked connection is aimed at the master, or fails with err; a connection to
 * the old master is closed, failing what was in flight on it with RLOCK_ECONN, and the pub/sub
 * one is redialled there with every wanted channel. */
void rlk_loop_moved(rlk_loop_client *lc, int err);

/* The channels' sharded side, for loop_shard.c through lc->up: a pushed message of the pub/sub
 * connection (sh NULL) or of shard sh's; ch's SUBSCRIBE (on 1) or UNSUBSCRIBE (on 0), in their
 * sharded forms in sharded pub/sub; ch freed when nobody wants it and nothing is pending; the
 * pub/sub redial timer started with the next back-off. */
void rlk_loop_push(rlk_loop_client *lc, rlk_loop_shard *sh, redisReply *rep);
int rlk_loop_chan_send(rlk_loop_client *lc, rlk_loop_chan *ch, int on);
void rlk_loop_chan_drop_if_idle(rlk_loop_client *lc, rlk_loop_chan *ch);
void rlk_loop_sub_retry(rlk_loop_client *lc);

/* Puts op on the client's list and watches its token (cancel may be NULL). */
int rlk_loop_op_add(rlk_loop_client *lc, rlk_loop_op *op, const rlock_cancel *cancel,
                    const rlk_loop_op_type *type);
/* Takes op off the list and its channel, and ends its token's watch. */
void rlk_loop_op_remove(rlk_loop_op *op);

/* Adds op to the waiters of channel, subscribing when it is new: 1 when the subscription is
 * confirmed already, 0 when RLK_LOOP_SUBSCRIBED will follow, or a negative error. */
int rlk_loop_join(rlk_loop_op *op, const char *channel, size_t len);
/* As rlk_loop_join(), for rlock's reentrant waiters: pattern (a glob that matches Redisson's
 * channel alone) by PSUBSCRIBE, which PUBSUB NUMSUB does not count, and the client's wake
 * channel by SUBSCRIBE; a message on the pattern wakes every waiter, one on the wake channel
 * goes to the waiters' told in turn, and to unclaimed (with key) when none takes it. */
typedef struct rlk_loop_named {
    /* The wake channel is "<wake_prefix>:{key}:<uuid>" (rlk_prefix_name(), the client's UUID);
     * wake_prefix must outlive the client (a string constant). */
    const char *wake_prefix, *key;
    size_t key_len; /* key: what unclaimed is called with */
    rlk_loop_unclaimed_fn unclaimed;
} rlk_loop_named;
int rlk_loop_join_named(rlk_loop_op *op, const char *pattern, size_t len,
                        const rlk_loop_named *named);
/* Takes op off its channel's waiters; the last one unsubscribes. */
void rlk_loop_leave(rlk_loop_op *op);

/* Brackets a loop callback that may run a done, which may free the client: after
 * rlk_loop_cb_leave() returns 1 the client is gone and the callback touches nothing of it.
 * Inline, so that the files below loop_client.c (loop_due.c) need no call into it. */
static inline void rlk_loop_cb_enter(rlk_loop_client *lc)
{
    lc->depth++;
}

static inline int rlk_loop_cb_leave(rlk_loop_client *lc)
{
    if (--lc->depth == 0 && lc->freed) {
        free(lc);
        return 1;
    }
    return lc->freed;
}

#endif
