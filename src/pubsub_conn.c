/*
 * The subscriber thread and its connection (see pubsub.c): dials the node, sends what the dirty
 * entries need (SUBSCRIBE/UNSUBSCRIBE), polls the connection, the wake pipe and a Sentinel's
 * +switch-master subscription, reads the pushes (pubsub_dispatch.c), resubscribes after a
 * reconnect or a master switch, and unsubscribes entries that lingered long enough. Also the
 * subscriber's creation and end, which start and join the thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "pubsub_impl.h"
#include "sentinel.h"

/* Sends what the dirty entries need. Called by the thread with the mutex held; only queues
 * bytes in the connection's output buffer. */
static void rlk_flush_dirty(rlk_pubsub *ps)
{
    while (ps->dirty != NULL) {
        rlk_sub *s = ps->dirty;
        ps->dirty = s->next_dirty;
        s->dirty = 0;
        int want = rlk_want(s);
        if (want != s->sent && ps->conn != NULL) {
            if (rlk_req_push(ps, s, want) != RLOCK_OK) {
                rlk_mark_dirty(ps, s); /* no memory now: tried again at the next round */
                return;
            }
            const char *argv[2] = {want ? "SUBSCRIBE" : "UNSUBSCRIBE", s->channel};
            size_t lens[2] = {want ? 9u : 11u, s->len};
            if (s->pattern) {
                argv[0] = want ? "PSUBSCRIBE" : "PUNSUBSCRIBE";
                argv[1] = s->pat;
                lens[0]++;
                lens[1] = s->pat_len;
            }
            (void)rlk_conn_append(ps->conn, 2, argv, lens); /* a failure shows at the write */
            s->sent = want;
            s->pending++;
        }
        if (s->refs == 0 && !s->lingering && !s->sent && s->pending == 0) {
            rlk_unlink_free(ps, s);
        }
    }
}

/* Forgets the server's state after the connection broke: nothing is subscribed any more. */
static void rlk_reset_entries(rlk_pubsub *ps)
{
    rlk_req_clear(ps);
    ps->twin_next = NULL;
    for (size_t i = 0; i < RLK_PS_BUCKETS; i++) {
        rlk_sub *s = ps->buckets[i];
        while (s != NULL) {
            rlk_sub *n = s->next;
            s->sent = 0;
            s->pending = 0;
            rlk_idle_unlink(ps, s); /* nobody waits: nothing to resubscribe */
            if (s->refs > 0) {
                rlk_mark_dirty(ps, s);
            } else if (!s->dirty) {
                rlk_unlink_free(ps, s);
            }
            s = n;
        }
    }
}

static void rlk_disconnect(rlk_pubsub *ps, const char *why)
{
    rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber connection lost (%s); resubscribing", why);
    rlk_conn_close(ps->conn);
    ps->conn = NULL;
    rlk_reset_entries(ps);
}

/* Waits for the wake pipe, the socket (if connected) and the Sentinel subscription (sfd >= 0) up
 * to timeout_ms; *srev gets the Sentinel socket's events. Mutex not held. */
static int rlk_ps_poll(rlk_pubsub *ps, int fd, int want_write, int timeout_ms, int sfd, short *srev)
{
    struct pollfd pfd[3] = {{.fd = ps->wake[0], .events = POLLIN},
                            {.fd = fd, .events = (short)(POLLIN | (want_write ? POLLOUT : 0))},
                            {.fd = sfd, .events = POLLIN}};
    int n = poll(pfd, 3, timeout_ms); /* a negative fd is ignored by poll() */
    if (n > 0 && (pfd[0].revents & POLLIN)) {
        char buf[64];
        while (read(ps->wake[0], buf, sizeof(buf)) > 0) {
        }
    }
    if (srev != NULL) {
        *srev = 0;
        if (n > 0 && sfd >= 0) {
            *srev = pfd[2].revents;
        }
    }
    return n > 0 && fd >= 0 ? pfd[1].revents : 0;
}

static void rlk_ps_connect(rlk_pubsub *ps)
{
    /* Writes are bounded by the connect timeout too: the thread only ever writes the few bytes
     * of SUBSCRIBE/UNSUBSCRIBE, and reads only what poll() says has arrived. */
    rlk_conn *conn = NULL;
    int64_t deadline = rlk_add_sat(rlk_now_ms(), ps->c->opts.connect_timeout_ms);
    /* Read before the dial: a switch during it leaves the connection stale, moved next round. */
    unsigned master = atomic_load(&ps->c->master_gen);
    int r = rlk_conn_open(ps->c, deadline, ps->c->opts.connect_timeout_ms, &conn);
    pthread_mutex_lock(&ps->mu);
    if (r == RLOCK_OK) {
        ps->conn = conn;
        ps->conn_master = master;
        ps->backoff_ms = 0;
        rlk_reset_entries(ps);
    } else {
        ps->backoff_ms = ps->backoff_ms ? ps->backoff_ms * 2 : 10;
        ps->backoff_ms = ps->backoff_ms > 1000 ? 1000 : ps->backoff_ms;
    }
    int64_t wait = ps->backoff_ms;
    pthread_mutex_unlock(&ps->mu);
    if (r != RLOCK_OK) {
        rlk_log(ps->c, RLOCK_LOG_WARN, "subscriber cannot connect: %s", rlock_last_error());
        rlk_sentinel_recheck(ps->c);
        rlk_ps_poll(ps, -1, 0, (int)wait, -1, NULL);
    }
}

/* Unsubscribes the entries that lingered long enough; returns how long the thread may sleep:
 * until the oldest lingering entry is due or, while any entry exists (one may start lingering
 * meanwhile, without waking the thread), one linger period. Mutex held. */
static int64_t rlk_expire_idle(rlk_pubsub *ps)
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

/* 1 (after dropping the connection) if the client moved to a new master since the connection was
 * dialled: the reconnect subscribes every channel with waiters on the new master, and each
 * confirmation wakes all of that channel's waiters to re-attempt once, since a release on either
 * master during the move may have published where nobody listened. Mutex held. */
static int rlk_ps_moved(rlk_pubsub *ps)
{
    if (ps->conn == NULL || ps->conn_master == atomic_load(&ps->c->master_gen)) {
        return 0;
    }
    rlk_log(ps->c, RLOCK_LOG_INFO, "subscriber: the master moved; resubscribing there");
    rlk_conn_close(ps->conn);
    ps->conn = NULL;
    rlk_reset_entries(ps);
    return 1;
}

/* Reads the Sentinel subscription if poll() said so, and moves at once if that switched the
 * master. Mutex not held. */
static void rlk_ps_sentinel(rlk_pubsub *ps, short srev)
{
    if (!(srev & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    rlk_sentinel_watch_read(ps->c, &ps->watch);
    pthread_mutex_lock(&ps->mu);
    (void)rlk_ps_moved(ps);
    pthread_mutex_unlock(&ps->mu);
}

/* One round of the connected loop: send, wait, read. */
static void rlk_ps_step(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    if (rlk_ps_moved(ps)) {
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    int64_t timeout = rlk_expire_idle(ps);
    int64_t due = rlk_check_confirmations(ps, rlk_now_ms());
    timeout = due < timeout ? due : timeout;
    rlk_flush_dirty(ps);
    rlk_conn *conn = ps->conn;
    pthread_mutex_unlock(&ps->mu);
    rlk_wake_given(ps); /* waiters of a subscription that just timed out */
    int done = 0;
    if (rlk_conn_flush(conn, &done) != RLOCK_OK) {
        pthread_mutex_lock(&ps->mu);
        rlk_disconnect(ps, rlock_last_error());
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    short srev = 0;
    int sfd = rlk_sentinel_watch_fd(ps->c, &ps->watch);
    int ev = rlk_ps_poll(ps, rlk_conn_fd(conn), !done, (int)timeout, sfd, &srev);
    if (srev != 0) {
        rlk_ps_sentinel(ps, srev);
        return; /* the data connection is read next round (it may have moved) */
    }
    if (!(ev & (POLLIN | POLLHUP | POLLERR))) {
        return;
    }
    int rr = rlk_conn_fill(conn); /* the connection is the thread's own: no mutex needed */
    pthread_mutex_lock(&ps->mu);
    if (rr != RLOCK_OK) {
        rlk_disconnect(ps, rlock_last_error());
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    redisReply *rep = NULL;
    while (rlk_conn_next(conn, &rep) == RLOCK_OK && rep != NULL) {
        rlk_on_reply(ps, rep);
        freeReplyObject(rep);
    }
    if (rlk_conn_broken(conn)) {
        rlk_disconnect(ps, rlock_last_error());
    }
    pthread_mutex_unlock(&ps->mu);
    rlk_wake_given(ps);
    rlk_send_armed(ps);
}

static void *rlk_ps_main(void *arg)
{
    rlk_pubsub *ps = arg;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        int running = ps->running;
        int connected = ps->conn != NULL;
        pthread_mutex_unlock(&ps->mu);
        if (!running) {
            break;
        }
        if (!connected) {
            rlk_ps_connect(ps);
        } else {
            rlk_ps_step(ps);
        }
    }
    return NULL;
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
    if (pipe(ps->wake) != 0) {
        free(ps);
        return rlk_err(RLOCK_ENOMEM, "cannot create the subscriber's wake pipe: %s",
                       strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(ps->wake[i], F_SETFL, fcntl(ps->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(ps->wake[i], F_SETFD, FD_CLOEXEC);
    }
    pthread_mutex_init(&ps->mu, NULL);
    if (pthread_create(&ps->thread, NULL, rlk_ps_main, ps) != 0) {
        close(ps->wake[0]);
        close(ps->wake[1]);
        pthread_mutex_destroy(&ps->mu);
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
    rlk_conn_close(ps->conn);
    rlk_sentinel_watch_close(&ps->watch);
    free(ps->reqs);
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
    rlk_conn_abandon(ps->conn);
    rlk_sentinel_watch_abandon(&ps->watch);
    free(ps->reqs);
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
