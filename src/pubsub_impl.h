/*
 * Private to the subscriber (pubsub.c, pubsub_armed.c): its state, shared by the two files. Every
 * field is guarded by the subscriber mutex unless its comment says "thread only" (touched by the
 * subscriber thread alone).
 */
#ifndef RLK_PUBSUB_IMPL_H
#define RLK_PUBSUB_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "pubsub.h"

#define RLK_PS_BUCKETS 4096

/* How long an entry without waiters stays subscribed. Long enough to cover the gap between two
 * waits of a busy worker, short enough that an idle client leaves no channel behind for long. */
#define RLK_PS_LINGER_MS 100

struct rlk_sub {
    struct rlk_sub *next;      /* hash chain */
    struct rlk_sub *next_dirty;
    char *channel;
    size_t len;
    int refs;                  /* local waiters */
    int permits;
    int sent;                  /* 1 if the last request sent was SUBSCRIBE */
    int pending;               /* replies to SUBSCRIBE/UNSUBSCRIBE not yet read */
    int dirty;                 /* linked in the dirty list */
    int lingering;             /* no waiter; linked in the idle list */
    int missed;                /* a message or confirmation arrived while nobody waited */
    int64_t idle_since;        /* when the last waiter left (lingering entries) */
    struct rlk_sub *idle_prev, *idle_next;
    struct rlk_sub *next_wake; /* in the thread's list of entries to wake (thread only) */
    int waking;
    rlk_armed *armed_head, *armed_tail; /* sleeping waiters' armed attempts, oldest first */
    pthread_cond_t cv;
};

struct rlk_pubsub {
    rlock_client *c;
    pthread_mutex_t mu;
    pthread_t thread;
    int running;
    int wake[2];               /* self-pipe: waiters wake the thread */
    redisContext *ctx;         /* owned by the thread */
    rlk_sub *buckets[RLK_PS_BUCKETS];
    rlk_sub *dirty;
    rlk_sub *idle_head, *idle_tail; /* lingering entries, oldest first */
    int64_t linger_ms;         /* RLK_PS_LINGER_MS; tests change it */
    size_t entries;            /* entries allocated (live, lingering or unsubscribing) */
    rlk_sub *wakes;            /* entries given permits by the read in progress (thread only) */
    rlk_armed *sending;        /* armed attempts claimed by the read in progress (thread only) */
    uint64_t armed_sent;       /* armed attempts sent (for tests) */
    uint64_t messages;         /* messages read (for tests) */
    size_t live;               /* entries with waiters */
    int64_t backoff_ms;
    int interrupted;           /* rlk_pubsub_interrupt(): every wait returns at once */
};

/* Armed attempts (pubsub_armed.c), all called with the mutex held except rlk_send_armed(). */
void rlk_armed_link(rlk_sub *s, rlk_armed *a);
void rlk_armed_unlink(rlk_sub *s, rlk_armed *a);
int rlk_claim_armed(rlk_pubsub *ps, rlk_sub *s);
void rlk_send_armed(rlk_pubsub *ps);

#endif
