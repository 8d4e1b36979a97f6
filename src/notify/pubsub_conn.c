/*
 * The subscriber thread and its connections: one thread per client dials the nodes it listens
 * on (the data node; in sharded cluster pub/sub, each master owning a listened slot), sends what
 * dirty entries need, polls the connections, the wake pipe and a Sentinel's +switch-master
 * subscription, and resubscribes after a reconnect, a master switch or a slot move. Also the
 * subscriber's creation and end. docs/internals/subscriber.md explains the design.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "cluster_slot.h"
#include "conn_open.h"
#include "error.h"
#include "pool.h"
#include "pubsub_armed.h"
#include "pubsub_conn.h"
#include "pubsub_dispatch.h"
#include "pubsub_impl.h"
#include "pubsub_requests.h"
#include "sentinel.h"
#include "sentinel_watch.h"

/* Polled descriptors kept on the stack: the wake pipe, a Sentinel and this many nodes. */
#define RLK_PS_POLL_STACK 16

/* The node at host:port ("" and 0: the client's data node), made when new; NULL without memory.
 * Mutex held. */
static rlk_ps_node *node_get(rlk_pubsub *ps, const char *host, int port)
{
    for (size_t i = 0; i < ps->n_nodes; i++) {
        rlk_ps_node *n = ps->nodes[i];
        if (n->port == port && strcmp(n->host, host) == 0) {
            return n;
        }
    }
    if (ps->n_nodes == ps->cap_nodes) {
        size_t cap = ps->cap_nodes ? 2 * ps->cap_nodes : 4;
        rlk_ps_node **grown = realloc(ps->nodes, cap * sizeof(rlk_ps_node *));
        if (grown == NULL) {
            return NULL;
        }
        ps->nodes = grown;
        ps->cap_nodes = cap;
    }
    rlk_ps_node *n = calloc(1, sizeof(*n));
    if (n != NULL) {
        snprintf(n->host, sizeof(n->host), "%s", host);
        n->port = port;
        ps->nodes[ps->n_nodes++] = n;
    }
    return n;
}

/* Where s is subscribed: the client's data node in classic mode; in sharded mode the master that
 * owns the slot of s's channel in the map. NULL when no node serves that slot (or without
 * memory): the map is read again first. Mutex held; the cluster's mutex is taken inside (it
 * guards the map alone and is never held across I/O or another lock). */
static rlk_ps_node *node_of(rlk_pubsub *ps, const rlk_sub *s)
{
    if (!ps->sharded) {
        return node_get(ps, "", 0);
    }
    char host[RLK_HOST_MAX];
    int port = 0;
    rlk_ps_node *n = NULL;
    int slot = rlk_cluster_key_slot(s->channel, s->len);
    if (rlk_cluster_owner(ps->c->cluster, slot, host, &port) == RLOCK_OK) {
        n = node_get(ps, host, port);
    }
    ps->refresh_due |= n == NULL;
    return n;
}

/* Queues s's SUBSCRIBE (want 1) or UNSUBSCRIBE on node's connection, in the mode's words. */
static void send_sub(rlk_pubsub *ps, rlk_ps_node *node, const rlk_sub *s, int want)
{
    const char *argv[2] = {want ? "SUBSCRIBE" : "UNSUBSCRIBE", s->channel};
    size_t lens[2] = {want ? 9u : 11u, s->len};
    if (ps->sharded) {
        argv[0] = want ? "SSUBSCRIBE" : "SUNSUBSCRIBE";
        lens[0]++;
    } else if (s->pattern) {
        argv[0] = want ? "PSUBSCRIBE" : "PUNSUBSCRIBE";
        argv[1] = s->pat;
        lens[0]++;
        lens[1] = s->pat_len;
    }
    (void)rlk_conn_append(node->conn, 2, argv, lens); /* a failure shows at the write */
}

/* Sends what the dirty entries need. Called by the thread with the mutex held; only queues
 * bytes in the connections' output buffers. An entry whose node has no connection yet waits for
 * it (the dial marks it dirty again); one without a node waits for the map. */
static void flush_dirty(rlk_pubsub *ps)
{
    while (ps->dirty != NULL) {
        rlk_sub *s = ps->dirty;
        ps->dirty = s->next_dirty;
        s->dirty = 0;
        int want = rlk_want(s);
        /* An entry with replies pending stays on its node: its requests are answered in order
         * there. Otherwise its slot's owner now is asked. */
        if (want && !s->sent && (s->node == NULL || s->pending == 0)) {
            s->node = node_of(ps, s);
        }
        rlk_ps_node *node = s->node;
        if (want != s->sent && node != NULL && node->conn == NULL) {
            node->need_dial = 1;
        } else if (want != s->sent && node != NULL) {
            if (rlk_req_push(node, s, want) != RLOCK_OK) {
                rlk_mark_dirty(ps, s); /* no memory now: tried again at the next round */
                return;
            }
            send_sub(ps, node, s, want);
            s->sent = want;
            s->pending++;
        }
        if (s->refs == 0 && !s->lingering && !s->sent && s->pending == 0) {
            rlk_unlink_free(ps, s);
        }
    }
}

/* Forgets what node's server knew (its connection broke, or a new one starts): nothing is
 * subscribed there any more. Entries with waiters are subscribed again, on the new connection,
 * or, in sharded mode, wherever the map then says. Mutex held. */
static void node_reset(rlk_pubsub *ps, rlk_ps_node *node)
{
    rlk_req_clear(node);
    node->twin_next = NULL;
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = ps->buckets[i];
        while (s != NULL) {
            rlk_sub *n = s->next;
            if (s->node == node) {
                s->sent = 0;
                s->pending = 0;
                s->node = ps->sharded ? NULL : node;
                rlk_idle_unlink(ps, s); /* nobody waits: nothing to resubscribe */
                if (s->refs > 0) {
                    rlk_mark_dirty(ps, s);
                } else if (!s->dirty) {
                    rlk_unlink_free(ps, s);
                }
            }
            s = n;
        }
    }
}

/* Marks dirty every entry that waits for a node (its owner was unknown, or its node failed), so
 * that the next flush asks the map read just now. Mutex held. */
static void redirty_detached(rlk_pubsub *ps)
{
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        for (rlk_sub *s = ps->buckets[i]; s != NULL; s = s->next) {
            if (s->node == NULL && rlk_want(s) && !s->sent) {
                rlk_mark_dirty(ps, s);
            }
        }
    }
}

static void node_lost(rlk_pubsub *ps, rlk_ps_node *node, const char *why)
{
    rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber connection %s%s%d lost (%s); resubscribing",
            node->host, node->host[0] ? ":" : "", node->port, why);
    rlk_conn_close(node->conn);
    node->conn = NULL;
    node->lost = 1;
    node_reset(ps, node);
    ps->refresh_due |= ps->sharded;
}

/* Reads a cluster client's map again when a node failed or a slot moved, then lets the entries
 * that wait for a node find theirs. Thread only, mutex not held (the refresh talks to nodes). */
static void ps_refresh(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    int due = ps->refresh_due && ps->c->cluster != NULL;
    int slot = ps->moved_slot;
    char host[RLK_HOST_MAX];
    snprintf(host, sizeof(host), "%s", ps->moved_host);
    int port = ps->moved_port;
    ps->refresh_due = 0;
    ps->moved_slot = -1;
    pthread_mutex_unlock(&ps->mu);
    if (!due) {
        return;
    }
    uint64_t epoch = 0;
    (void)rlk_cluster_pool(ps->c->cluster, -1, &epoch);
    (void)rlk_cluster_refresh(ps->c->cluster, epoch);
    if (slot >= 0) {
        /* A MOVED names the owner even when the node asked has not heard of the move yet. */
        rlk_cluster_note_moved(ps->c->cluster, slot, host, port);
    }
    pthread_mutex_lock(&ps->mu);
    redirty_detached(ps);
    pthread_mutex_unlock(&ps->mu);
}

/* Dials node: the client's data node (classic), or a master of the cluster. A failure pauses
 * that node's dials (10 ms doubling to 1 s); in sharded mode its entries look for their owner in
 * the map read again, since a node that cannot be reached may have failed over. Mutex not
 * held. */
static void node_dial(rlk_pubsub *ps, rlk_ps_node *node)
{
    /* Writes are bounded by the connect timeout too: the thread only ever writes the few bytes
     * of SUBSCRIBE/UNSUBSCRIBE, and reads only what poll() says has arrived. */
    rlk_conn *conn = NULL;
    int64_t timeout = ps->c->opts.connect_timeout_ms;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), timeout);
    /* Read before the dial: a switch during it leaves the connection stale, moved next round. */
    unsigned master = atomic_load(&ps->c->master_gen);
    int r = RLOCK_OK;
    if (node->host[0] == '\0') {
        r = rlk_conn_open(ps->c, deadline, timeout, &conn);
    } else {
        rlk_endpoint ep;
        char buf[RLK_HOST_MAX];
        rlk_client_endpoint(ps->c, &ep, buf);
        ep.host = node->host;
        ep.port = node->port;
        r = rlk_conn_open_at(ps->c, &ep, deadline, timeout, &conn);
    }
    pthread_mutex_lock(&ps->mu);
    node->need_dial = 0;
    if (r == RLOCK_OK) {
        node->conn = conn;
        node->conn_master = master;
        node->backoff_ms = 0;
        node_reset(ps, node);
    } else {
        node->backoff_ms = node->backoff_ms ? node->backoff_ms * 2 : 10;
        node->backoff_ms = node->backoff_ms > 1000 ? 1000 : node->backoff_ms;
        node->dial_at = rlk_now_ms() + node->backoff_ms;
        if (ps->sharded) {
            node_reset(ps, node);
            ps->refresh_due = 1;
        }
    }
    int reconnect = r == RLOCK_OK && node->lost;
    node->lost &= !reconnect;
    pthread_mutex_unlock(&ps->mu);
    if (reconnect) {
        rlk_obs_count(ps->c, RLK_CNT_RECONNECTS);
    }
    if (r != RLOCK_OK) {
        rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber cannot connect: %s", rlock_last_error());
        rlk_sentinel_recheck(ps->c);
    }
}

/* The node to dial now, if any: the client's data node is always kept connected (classic), a
 * cluster master while an entry waits for it. *timeout is shortened to the next node's pause.
 * Mutex held. */
static rlk_ps_node *node_to_dial(rlk_pubsub *ps, int64_t *timeout)
{
    int64_t now = rlk_now_ms();
    for (size_t i = 0; i < ps->n_nodes; i++) {
        rlk_ps_node *n = ps->nodes[i];
        if (n->conn != NULL || (!n->need_dial && n->host[0] != '\0')) {
            continue;
        }
        if (n->dial_at <= now) {
            return n;
        }
        *timeout = n->dial_at - now < *timeout ? n->dial_at - now : *timeout;
    }
    return NULL;
}

/* Unsubscribes the entries that lingered long enough; returns how long the thread may sleep:
 * until the oldest lingering entry is due or, while any entry exists (one may start lingering
 * meanwhile, without waking the thread), one linger period. Mutex held. */
static int64_t expire_idle(rlk_pubsub *ps)
{
    int64_t now = rlk_now_ms();
    while (ps->idle_head != NULL && now - ps->idle_head->idle_since >= ps->linger_ms) {
        rlk_sub *s = ps->idle_head;
        rlk_idle_unlink(ps, s);
        rlk_mark_dirty(ps, s);
    }
    int64_t left = ps->idle_head != NULL ? ps->idle_head->idle_since + ps->linger_ms - now
                   : ps->entries > 0     ? ps->linger_ms
                                         : 1000;
    return left > 1000 ? 1000 : left;
}
/* 1 (after dropping the connection) if the client moved to a new master since the data node's
 * connection was dialled (classic mode): the reconnect subscribes every channel with waiters on
 * the new master, and each confirmation wakes all of that channel's waiters to re-attempt once,
 * since a release on either master during the move may have published where nobody listened.
 * Mutex held. */
static int ps_moved(rlk_pubsub *ps)
{
    rlk_ps_node *n = ps->sharded || ps->n_nodes == 0 ? NULL : ps->nodes[0];
    if (n == NULL || n->conn == NULL || n->conn_master == atomic_load(&ps->c->master_gen)) {
        return 0;
    }
    rlk_log(ps->c, RLOCK_LOG_INFO, "subscriber: the master moved; resubscribing there");
    rlk_conn_close(n->conn);
    n->conn = NULL;
    node_reset(ps, n);
    return 1;
}

/* Reads the Sentinel subscription if poll() said so, and moves at once if that switched the
 * master. Mutex not held. */
static void ps_sentinel(rlk_pubsub *ps, short srev)
{
    if (!(srev & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    rlk_sentinel_watch_read(ps->c, &ps->watch);
    pthread_mutex_lock(&ps->mu);
    (void)ps_moved(ps);
    pthread_mutex_unlock(&ps->mu);
}

/* Writes what is queued on every node's connection; events[i] gets what to poll node i for
 * (POLLOUT too while some of its bytes are left). 0, or -1 after a connection failed (the round
 * ends). Mutex not held: the connections are the thread's own. */
static int ps_write(rlk_pubsub *ps, short *events)
{
    for (size_t i = 0; i < ps->n_nodes; i++) {
        rlk_ps_node *n = ps->nodes[i];
        events[i] = 0;
        if (n->conn == NULL) {
            continue;
        }
        int done = 0;
        if (rlk_conn_flush(n->conn, &done) != RLOCK_OK) {
            pthread_mutex_lock(&ps->mu);
            node_lost(ps, n, rlock_last_error());
            pthread_mutex_unlock(&ps->mu);
            return -1;
        }
        events[i] = (short)(POLLIN | (done ? 0 : POLLOUT));
    }
    return 0;
}

/* Reads what arrived on node's connection and handles every complete reply. Mutex not held. */
static void node_read(rlk_pubsub *ps, rlk_ps_node *node)
{
    int rr = rlk_conn_fill(node->conn); /* the connection is the thread's own: no mutex needed */
    pthread_mutex_lock(&ps->mu);
    if (rr != RLOCK_OK) {
        node_lost(ps, node, rlock_last_error());
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    redisReply *rep = NULL;
    while (rlk_conn_next(node->conn, &rep) == RLOCK_OK && rep != NULL) {
        rlk_on_reply(ps, node, rep);
        freeReplyObject(rep);
    }
    if (rlk_conn_broken(node->conn)) {
        node_lost(ps, node, rlock_last_error());
    }
    pthread_mutex_unlock(&ps->mu);
}

/* Waits for the wake pipe, every node's connection and the Sentinel subscription up to
 * timeout_ms, then reads what arrived. Mutex not held. */
static void ps_wait(rlk_pubsub *ps, const short *events, int timeout_ms)
{
    size_t n = ps->n_nodes;
    struct pollfd stack[RLK_PS_POLL_STACK + 2];
    struct pollfd *pfd = n <= RLK_PS_POLL_STACK ? stack : malloc((n + 2) * sizeof(*pfd));
    if (pfd == NULL) {
        pfd = stack; /* without memory the nodes past the stack's wait for another round */
        n = RLK_PS_POLL_STACK;
    }
    pfd[0] = (struct pollfd){.fd = ps->wake[0], .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = rlk_sentinel_watch_fd(ps->c, &ps->watch), .events = POLLIN};
    for (size_t i = 0; i < n; i++) {
        rlk_conn *conn = ps->nodes[i]->conn;
        pfd[i + 2] =
            (struct pollfd){.fd = conn != NULL ? rlk_conn_fd(conn) : -1, .events = events[i]};
    }
    int got = poll(pfd, (nfds_t)(n + 2), timeout_ms); /* a negative fd is ignored by poll() */
    if (got > 0 && (pfd[0].revents & POLLIN)) {
        char buf[64];
        while (read(ps->wake[0], buf, sizeof(buf)) > 0) {
        }
    }
    if (got > 0 && pfd[1].fd >= 0 && pfd[1].revents != 0) {
        ps_sentinel(ps, pfd[1].revents);
    } else {
        for (size_t i = 0; got > 0 && i < n; i++) {
            if (ps->nodes[i]->conn != NULL && (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) {
                node_read(ps, ps->nodes[i]);
            }
        }
    }
    if (pfd != stack) {
        free(pfd);
    }
}

/* One round of the loop: read the map if due, send, dial a node that needs it, or wait and
 * read. */
static void ps_step(rlk_pubsub *ps)
{
    ps_refresh(ps);
    pthread_mutex_lock(&ps->mu);
    if (ps_moved(ps)) {
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    int64_t timeout = expire_idle(ps);
    int64_t due = rlk_check_confirmations(ps, rlk_now_ms());
    timeout = due < timeout ? due : timeout;
    flush_dirty(ps);
    rlk_ps_node *dial = node_to_dial(ps, &timeout);
    short stack[RLK_PS_POLL_STACK];
    short *events = ps->n_nodes <= RLK_PS_POLL_STACK ? stack : calloc(ps->n_nodes, sizeof(short));
    pthread_mutex_unlock(&ps->mu);
    rlk_wake_given(ps); /* waiters of a subscription that just timed out */
    if (dial != NULL) {
        node_dial(ps, dial);
    } else if (events != NULL && ps_write(ps, events) == 0) {
        ps_wait(ps, events, (int)timeout);
        rlk_wake_given(ps);
        rlk_send_armed(ps);
    }
    if (events != stack) {
        free(events);
    }
}

static void *ps_main(void *arg)
{
    rlk_pubsub *ps = arg;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        int running = ps->running;
        pthread_mutex_unlock(&ps->mu);
        if (!running) {
            break;
        }
        ps_step(ps);
    }
    return NULL;
}

/* Closes (abandon: abandons, in a child of fork()) every node's connection and frees the nodes. */
static void nodes_free(rlk_pubsub *ps, int abandon)
{
    for (size_t i = 0; i < ps->n_nodes; i++) {
        rlk_ps_node *n = ps->nodes[i];
        if (abandon) {
            rlk_conn_abandon(n->conn);
        } else {
            rlk_conn_close(n->conn);
        }
        free(n->reqs);
        free(n);
    }
    free(ps->nodes);
    ps->nodes = NULL;
    ps->n_nodes = ps->cap_nodes = 0;
}

int rlk_pubsub_new(rlock_client *c, rlk_pubsub **out)
{
    rlk_pubsub *ps = calloc(1, sizeof(*ps));
    if (ps == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the subscriber");
    }
    ps->c = c;
    ps->running = 1;
    ps->linger_ms = RLK_PS_LINGER_MS;
    ps->moved_slot = -1;
    /* Sharded pub/sub has no patterns: the reentrant lock's waiters listen plainly there. */
    ps->sharded = c->sharded;
    ps->no_patterns = c->sharded;
    if (!ps->sharded && node_get(ps, "", 0) == NULL) {
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the subscriber");
    }
    if (pipe(ps->wake) != 0) {
        nodes_free(ps, 0);
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot create the subscriber's wake pipe: %s",
                       strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(ps->wake[i], F_SETFL, fcntl(ps->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(ps->wake[i], F_SETFD, FD_CLOEXEC);
    }
    pthread_mutex_init(&ps->mu, NULL);
    if (pthread_create(&ps->thread, NULL, ps_main, ps) != 0) {
        close(ps->wake[0]);
        close(ps->wake[1]);
        pthread_mutex_destroy(&ps->mu);
        nodes_free(ps, 0);
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot start the subscriber thread");
    }
    *out = ps;
    return RLOCK_OK;
}

void rlk_pubsub_free(rlk_pubsub *ps)
{
    if (ps == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->mu);
    ps->running = 0;
    pthread_mutex_unlock(&ps->mu);
    rlk_poke(ps);
    pthread_join(ps->thread, NULL);
    nodes_free(ps, 0);
    rlk_sentinel_watch_close(&ps->watch);
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = NULL;
        while ((s = ps->buckets[i]) != NULL) {
            ps->buckets[i] = s->next;
            rlk_sub_destroy(ps, s);
        }
    }
    close(ps->wake[0]);
    close(ps->wake[1]);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}

void rlk_pubsub_abandon(rlk_pubsub *ps)
{
    if (ps == NULL) {
        return;
    }
    /* The thread does not exist in this process; its connection is the parent's too. */
    nodes_free(ps, 1);
    rlk_sentinel_watch_abandon(&ps->watch);
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = NULL;
        while ((s = ps->buckets[i]) != NULL) {
            ps->buckets[i] = s->next;
            /* Not rlk_sub_destroy(): the entry's condition variable may count the parent's
             * waiters, which do not exist here, and destroying it would wait for them. */
            free(s->fail_msg);
            free(s->twin);
            free(s->pat);
            free(s->channel);
            free(s);
        }
    }
    /* The armed attempts of the parent's waiters are theirs: left alone, as their memory. */
    close(ps->wake[0]);
    close(ps->wake[1]);
    free(ps);
}

int rlk_pubsub_connected(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    int connected = 1;
    for (size_t i = 0; i < ps->n_nodes; i++) {
        connected &= ps->nodes[i]->conn != NULL;
    }
    pthread_mutex_unlock(&ps->mu);
    return connected;
}
