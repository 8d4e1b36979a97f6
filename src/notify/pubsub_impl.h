/*
 * Private to the subscriber (pubsub*.c): its state, shared by its files, and the channel table's
 * functions (pubsub.c) that they call. Every
 * field is guarded by the subscriber mutex unless its comment says "thread only" (touched by the
 * subscriber thread alone).
 */
#ifndef RLK_PUBSUB_IMPL_H
#define RLK_PUBSUB_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "context.h"
#include "conn.h"
#include "pubsub.h"
#include "sentinel_watch.h"

#define RLK_PS_BUCKETS 4096

/* How long an entry without waiters stays subscribed. Long enough to cover the gap between two
 * waits of a busy worker, short enough that an idle client leaves no channel behind for long. */
#define RLK_PS_LINGER_MS 100

/* An armed attempt (pubsub.h). cmd, len and cv are set up once per wait; the rest is guarded by
 * the mutex. */
enum { RLK_ARMED_IDLE = 0, RLK_ARMED_SENT, RLK_ARMED_GRANTED };
struct rlk_armed {
    char *cmd;
    size_t len;
    pthread_cond_t cv;      /* an armed waiter sleeps here */
    int state;              /* RLK_ARMED_SENT: the attempt was sent on conn; GRANTED: a
                               release granted the lock (token), nothing is sent */
    uint64_t token;         /* RLK_ARMED_GRANTED: the grant's fencing token; SENT: the
                               token of the grant the attempt confirms, 0 for a wake-up */
    int tail;               /* replies behind the attempt's (rlk_armed_set_tail) */
    int inflight;           /* the subscriber thread still uses cmd and cv */
    rlk_conn *conn;         /* borrowed from the pool; the owner reads the reply and returns it */
    struct rlk_armed *next; /* the subscriber thread's list of attempts to send */
    struct rlk_armed *aprev, *anext; /* the entry's list of sleeping armed waiters */
    int listed;
    redisReply *reply;       /* the reply read by rlk_armed_finish(), until taken */
    char tag[RLK_OWNER_MAX]; /* who the waiter is (rlk_armed_set_tag), for named wake-ups */
    size_t tag_len;
    uint64_t wait; /* the wait's id (rlk_armed_set_tag), which a grant's message repeats */
    uint64_t seen; /* the entry's wake_alls this waiter has answered (rlk_armed_begin) */
};

typedef struct rlk_ps_node rlk_ps_node;

/* A grant (RLK_WAIT_GRANTED) read while its waiter was not asleep with its armed record (between
 * two attempts): kept on the entry until that waiter's next rlk_sub_wait() takes it, so that it
 * is delivered to that waiter and no other (a permit could be taken by any local waiter). */
#define RLK_PENDING_GRANTS 4
typedef struct rlk_pending_grant {
    char tag[RLK_OWNER_MAX];
    size_t tag_len; /* 0: a free slot */
    uint64_t wait, token;
} rlk_pending_grant;

struct rlk_sub {
    struct rlk_sub *next; /* hash chain */
    /* The node whose connection carries the entry's (un)subscriptions; NULL until the thread
     * assigns one (pubsub_conn.c), and again after that node's connection failed or the server
     * dropped the subscription (a slot that moved): the next flush looks the owner up again. */
    rlk_ps_node *node;
    struct rlk_sub *next_dirty;
    char *channel;
    size_t len;
    int refs; /* local waiters */
    int permits;
    int sent;           /* 1 if the last request sent was SUBSCRIBE */
    int pending;        /* replies to SUBSCRIBE/UNSUBSCRIBE not yet read */
    int dirty;          /* linked in the dirty list */
    int lingering;      /* no waiter; linked in the idle list */
    int missed;         /* a message or confirmation arrived while nobody waited */
    int mode;           /* RLK_MSG_*: how a message becomes permits */
    int64_t idle_since; /* when the last waiter left (lingering entries) */
    struct rlk_sub *idle_prev, *idle_next;
    struct rlk_sub *next_wake; /* in the thread's list of entries to wake (thread only) */
    int waking;
    rlk_armed *armed_head, *armed_tail; /* sleeping waiters' armed attempts, oldest first */
    int refused;    /* Redis refused the SUBSCRIBE: not sent again while waited on */
    int fail_code;  /* != 0: the subscription failed; its waiters return this code */
    char *fail_msg; /* ... with this detail (NULL if it could not be allocated) */
    char *twin;     /* RLK_MSG_NAMED: the channel whose waiters the names refer to */
    size_t twin_len;
    /* 1: subscribed as a pattern matching channel alone (PSUBSCRIBE pat, channel's glob
     * characters escaped), which PUBSUB NUMSUB does not count (rlk_sub_join_pattern). */
    int pattern;
    char *pat;
    size_t pat_len;
    pthread_cond_t cv;
    /* Wake-ups of every waiter given so far (a confirmation, a reconnect, a "1"). Each also
     * gives a permit per waiter, but a fast waiter may take two before a slow one wakes; an
     * armed waiter wakes on the count as well, so each one waiting then attempts again. */
    uint64_t wake_alls;
    rlk_pending_grant grants[RLK_PENDING_GRANTS]; /* grants for waiters not asleep */
    unsigned grants_next;                         /* the slot the next one replaces */
};

/* A SUBSCRIBE or UNSUBSCRIBE sent and not answered yet. Redis answers them in order, so the
 * oldest one is what an error reply refuses, and the first to miss subscription_timeout_ms. */
typedef struct rlk_ps_req {
    rlk_sub *s; /* kept alive: an entry with pending requests is never freed */
    int64_t sent_at;
    int subscribe;
    int checked; /* its timeout was handled */
} rlk_ps_req;

/* A node the subscriber listens on, with its own connection and its own request ring (Redis
 * answers each connection's requests in order). Classic pub/sub (every client but a sharded
 * cluster client) uses one node, the client's data node (host ""), followed across a master
 * switch. A sharded cluster client has one per master that owns the slot of a channel it
 * listens on (SSUBSCRIBE must go there), all served by the one subscriber thread. Nodes live as
 * long as the subscriber; their connections close when they fail. Guarded by the mutex, except
 * conn, which only the thread uses. */
struct rlk_ps_node {
    char host[RLK_HOST_MAX]; /* "" = the client's data node (classic) */
    int port;
    rlk_conn *conn;
    unsigned conn_master; /* the client's master_gen when conn was dialled (classic) */
    rlk_ps_req *reqs;     /* ring of requests awaiting their reply, oldest first */
    size_t req_head, req_count, req_cap;
    /* The entry whose "0" the reply read next answers a named wake-up, which the name already
     * delivered (set by a RLK_MSG_NAMED message, cleared by the next reply). */
    rlk_sub *twin_next;
    int64_t backoff_ms; /* the pause after a failed dial, doubled up to 1 s */
    int64_t dial_at;    /* no dial before this monotonic time */
    int need_dial;      /* an entry waits for this node's connection */
    int lost;           /* the connection broke: its next dial is a reconnect (thread only) */
};

struct rlk_pubsub {
    rlock_client *c;
    pthread_mutex_t mu;
    pthread_t thread;
    int running;
    int wake[2];         /* self-pipe: waiters wake the thread */
    int sharded;         /* the client's sharded pub/sub: SSUBSCRIBE on each channel's master */
    rlk_ps_node **nodes; /* nodes[0] is the client's data node in classic mode */
    size_t n_nodes, cap_nodes;
    /* A cluster client's map must be read again (a node failed, a slot moved); done by the
     * thread without the mutex. moved_* is a MOVED reply's news, recorded after it. */
    int refresh_due;
    int moved_slot;
    char moved_host[RLK_HOST_MAX];
    int moved_port;
    rlk_sentinel_watch watch; /* +switch-master on a Sentinel (thread only; sentinel_watch.c) */
    rlk_sub *buckets[RLK_PS_BUCKETS];
    rlk_sub *dirty;
    rlk_sub *idle_head, *idle_tail; /* lingering entries, oldest first */
    int64_t linger_ms;              /* RLK_PS_LINGER_MS; tests change it */
    size_t entries;                 /* entries allocated (live, lingering or unsubscribing) */
    rlk_sub *wakes;            /* entries given permits by the read in progress (thread only) */
    rlk_armed *sending;        /* armed attempts claimed by the read in progress (thread only) */
    uint64_t armed_sent;       /* armed attempts sent (for tests) */
    uint64_t messages;         /* messages read (for tests) */
    _Atomic uint64_t confirms; /* SUBSCRIBE confirmations read (rlk_pubsub_confirms) */
    size_t live;               /* entries with waiters */
    int interrupted;           /* rlk_pubsub_interrupt(): every wait returns at once */
    /* Redis refused a PSUBSCRIBE (an ACL without it), or the client uses sharded pub/sub, which
     * has no patterns: pattern joins subscribe plainly. */
    int no_patterns;
};

/* The channel table (pubsub.c), shared by the subscriber's files; the thread calls them with the
 * mutex held. */
/* The entry of ch subscribed plainly (pattern 0) or through its literal pattern (1), or NULL. */
rlk_sub *rlk_find(rlk_pubsub *ps, const char *ch, size_t len, int pattern);
/* Takes s out of the idle list (it gets a waiter again, expires, or is freed). */
void rlk_idle_unlink(rlk_pubsub *ps, rlk_sub *s);
/* Frees an entry already taken out of its hash chain. */
void rlk_sub_destroy(rlk_pubsub *ps, rlk_sub *s);
/* Wakes the subscriber thread (its self-pipe). */
void rlk_poke(rlk_pubsub *ps);
/* Adds k permits (at most one per waiter), woken as rlk_give_later(). */
void rlk_give_n_later(rlk_pubsub *ps, rlk_sub *s, int k);
/* Wakes the waiters given permits by rlk_give_later(); the thread calls it without the mutex. */
void rlk_wake_given(rlk_pubsub *ps);
void rlk_unlink_free(rlk_pubsub *ps, rlk_sub *s);
void rlk_mark_dirty(rlk_pubsub *ps, rlk_sub *s);
void rlk_give_later(rlk_pubsub *ps, rlk_sub *s, int all);
int rlk_want(const rlk_sub *s);
/* The lock channel a wake channel's (RLK_MSG_NAMED) names refer to: joined through its pattern,
 * or plainly when Redis refused the pattern; NULL for other entries. */
rlk_sub *rlk_twin_of(rlk_pubsub *ps, const rlk_sub *n);

/* The server dropped s's sharded subscription (its slot moved) or redirected its SSUBSCRIBE:
 * s is subscribed again on its slot's owner after the map was read again (pubsub_conn.c), and
 * that confirmation wakes its waiters to re-attempt once. Mutex held. */
void rlk_sub_moved(rlk_pubsub *ps, rlk_sub *s);

#endif
