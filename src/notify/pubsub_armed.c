/*
 * Armed attempts (see pubsub.h): the entry's list of sleeping armed waiters, the claim that
 * answers a "0" message with the oldest one's attempt, the send, the hand-back of the record,
 * and the owner's reading of the reply. The wait loop only ever sees the reply.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pool.h"
#include "pubsub_armed.h"
#include "pubsub_impl.h"

/* The entry's armed attempts, in the order their owners went to sleep (mutex held). */
void rlk_armed_link(rlk_sub *s, rlk_armed *a)
{
    a->anext = NULL;
    a->aprev = s->armed_tail;
    *(s->armed_tail ? &s->armed_tail->anext : &s->armed_head) = a;
    s->armed_tail = a;
    a->listed = 1;
}

void rlk_armed_unlink(rlk_sub *s, rlk_armed *a)
{
    if (a == NULL || !a->listed) {
        return;
    }
    *(a->aprev ? &a->aprev->anext : &s->armed_head) = a->anext;
    *(a->anext ? &a->anext->aprev : &s->armed_tail) = a->aprev;
    a->aprev = a->anext = NULL;
    a->listed = 0;
}

/* Claims a, a sleeping armed waiter of s (mutex held), for a message that arrived: gives it an
 * idle connection and queues it for rlk_send_armed(), which sends it right after the waiter is
 * woken; the waiter then reads the reply there. RLOCK_ECONN (no idle connection; the pool is
 * never waited for here): the waiter gets a permit and attempts itself, as without arming. */
static int armed_claim(rlk_pubsub *ps, rlk_sub *s, rlk_armed *a)
{
    rlk_conn *conn = NULL;
    /* A cluster client's pool here is its home node's, which may not serve the lock's slot:
     * its waiters attempt themselves (cluster routing of armed attempts is not built yet). */
    if (ps->c->cluster != NULL || rlk_pool_try_idle(ps->c->pool, &conn) != RLOCK_OK) {
        return RLOCK_ECONN;
    }
    rlk_armed_unlink(s, a);
    a->conn = conn;
    a->token = 0;
    a->state = RLK_ARMED_SENT;
    a->inflight = 1;
    a->next = ps->sending;
    ps->sending = a;
    ps->armed_sent++;
    return RLOCK_OK;
}

/* A "0" wakes the waiter that has slept longest. */
int rlk_claim_armed(rlk_pubsub *ps, rlk_sub *s)
{
    return armed_claim(ps, s, s->armed_head);
}

int rlk_claim_armed_tagged(rlk_pubsub *ps, rlk_sub *s, const char *tag, size_t len)
{
    for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
        if (a->tag_len == len && memcmp(a->tag, tag, len) == 0) {
            return armed_claim(ps, s, a);
        }
    }
    return RLOCK_ECONN;
}

int rlk_grant_armed_tagged(rlk_pubsub *ps, rlk_sub *s, const char *tag, size_t len, uint64_t wait,
                           uint64_t token)
{
    for (rlk_armed *a = s->armed_head; a != NULL; a = a->anext) {
        if (a->tag_len == len && memcmp(a->tag, tag, len) == 0) {
            if (a->wait != wait) {
                return RLOCK_EINVAL;
            }
            /* A waiter that confirms its grants (its attempt carries the replicas' WAIT) is
             * sent that attempt, which finds the grant; without an idle connection it is
             * handed the grant and attempts itself. */
            if (a->tail > 0 && armed_claim(ps, s, a) == RLOCK_OK) {
                a->token = token;
                return RLOCK_OK;
            }
            /* Queued like a claimed attempt without a connection: rlk_send_armed() sends
             * nothing, and hands it back and wakes the owner in one step. */
            rlk_armed_unlink(s, a);
            a->conn = NULL;
            a->token = token;
            a->state = RLK_ARMED_GRANTED;
            a->inflight = 1;
            a->next = ps->sending;
            ps->sending = a;
            return RLOCK_OK;
        }
    }
    return RLOCK_ECONN;
}

/* Hands a grant (nothing to send) back to its owner and wakes it, in one step: the owner, woken
 * with the record already handed back, returns at once instead of sleeping again until a second
 * signal. The signal goes out with the mutex held, which the thread drops right away; the owner
 * may free the record as soon as it holds the mutex, so the record is not touched after. */
static void armed_hand_grant(rlk_pubsub *ps, rlk_armed *a)
{
    pthread_mutex_lock(&ps->mu);
    a->next = NULL;
    a->inflight = 0;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&ps->mu);
}

void rlk_grant_pending(rlk_sub *s, const char *tag, size_t len, uint64_t wait, uint64_t token)
{
    rlk_pending_grant *slot = NULL, *empty = NULL;
    for (unsigned i = 0; i < RLK_PENDING_GRANTS && slot == NULL; i++) {
        rlk_pending_grant *p = &s->grants[i];
        slot = p->tag_len == len && memcmp(p->tag, tag, len) == 0 ? p : NULL;
        empty = empty == NULL && p->tag_len == 0 ? p : empty;
    }
    if (slot == NULL) {
        /* A lock has one grant outstanding at a time and ended waits drop theirs
         * (rlk_armed_end_wait): a slot still taken is an unarmed waiter's, replaced in turn. */
        slot = empty != NULL ? empty : &s->grants[s->grants_next++ % RLK_PENDING_GRANTS];
    }
    if (len < sizeof(slot->tag)) {
        memcpy(slot->tag, tag, len);
        slot->tag_len = len;
        slot->wait = wait;
        slot->token = token;
    }
}

int rlk_grant_take_pending(rlk_sub *s, rlk_armed *armed)
{
    for (unsigned i = 0; armed != NULL && i < RLK_PENDING_GRANTS; i++) {
        rlk_pending_grant *p = &s->grants[i];
        if (p->tag_len != armed->tag_len || memcmp(p->tag, armed->tag, p->tag_len) != 0) {
            continue;
        }
        p->tag_len = 0;
        if (p->wait == armed->wait) {
            armed->token = p->token;
            armed->state = RLK_ARMED_GRANTED;
            return 1;
        }
    }
    return 0;
}

/* Sends the claimed armed attempts. Called by the thread without the mutex, after
 * rlk_wake_given(). Each owner is woken just before its attempt goes out, so it is scheduled
 * while Redis runs the attempt; it waits for the hand-back below (armed_settle()), then reads
 * the reply on the connection it was given (the send bypasses its buffers, and a TLS read, which
 * holds the session while it blocks, never runs beside the send). A record stays the thread's
 * until the hand-back, before which its owner neither reads nor reuses nor frees it. */
void rlk_send_armed(rlk_pubsub *ps)
{
    rlk_armed *claimed = ps->sending, *list = NULL;
    ps->sending = NULL;
    for (rlk_armed *a = claimed, *next; a != NULL; a = next) {
        next = a->next;
        if (a->conn == NULL) {
            armed_hand_grant(ps, a);
            continue;
        }
        a->next = list;
        list = a;
        /* Wake the owner first, then send, so that its scheduling overlaps Redis' work. A
         * failed send leaves a broken connection, on which the owner's read fails too
         * (RLOCK_ECONN, like a failed attempt of its own). */
        pthread_cond_signal(&a->cv);
        (void)rlk_conn_send(a->conn, a->cmd, a->len);
        rlk_obs_add(ps->c, RLK_CNT_REDIS_COMMANDS,
                    1 + (uint64_t)a->tail); /* the attempt, its WAIT */
    }
    if (list == NULL) {
        return;
    }
    /* Hand the records back (armed_settle): their owners may now reuse or free them. */
    pthread_mutex_lock(&ps->mu);
    for (rlk_armed *a = list, *next; a != NULL; a = next) {
        next = a->next;
        a->next = NULL;
        a->inflight = 0;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&ps->mu);
}

/* Waits until the subscriber thread handed the record back (in practice it did so long before
 * the reply came back), so that its owner may read the connection, reuse or free the record. */
static void armed_settle(rlk_pubsub *ps, rlk_armed *a)
{
    pthread_mutex_lock(&ps->mu);
    while (a->inflight) {
        pthread_cond_wait(&a->cv, &ps->mu);
    }
    pthread_mutex_unlock(&ps->mu);
}

int rlk_armed_finish(rlk_pubsub *ps, rlk_armed *a)
{
    armed_settle(ps, a);
    if (a->state == RLK_ARMED_GRANTED) {
        return RLK_WAIT_GRANTED;
    }
    int r = rlk_conn_read(a->conn, &a->reply);
    /* A failed read is like a failed attempt of the waiter's own: the outcome is unknown, so
     * the attempt is not resent, and the connection is closed. Replies still due behind the
     * attempt's are the owner's to read (rlk_armed_take_conn). */
    if (r != RLOCK_OK || a->tail == 0) {
        rlk_pool_return(ps->c->pool, a->conn, r != RLOCK_OK);
        a->conn = NULL;
    }
    return r == RLOCK_OK ? RLK_WAIT_REPLY : r;
}

int rlk_armed_new(char *cmd, size_t len, rlk_armed **out)
{
    rlk_armed *a = calloc(1, sizeof(*a));
    *out = a;
    if (a == NULL) {
        free(cmd);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate an armed attempt");
    }
    a->cmd = cmd;
    a->len = len;
    rlk_cond_init_monotonic(&a->cv);
    return RLOCK_OK;
}

void rlk_armed_set_tag(rlk_armed *a, const char *tag, size_t len, uint64_t wait)
{
    if (a != NULL && len < sizeof(a->tag)) {
        memcpy(a->tag, tag, len);
        a->tag_len = len;
        a->wait = wait;
    }
}

void rlk_armed_set_tail(rlk_armed *a, int tail)
{
    if (a != NULL) {
        a->tail = tail;
    }
}

struct rlk_conn *rlk_armed_take_conn(rlk_armed *a)
{
    rlk_conn *conn = a->conn;
    a->conn = NULL;
    return conn;
}

void rlk_armed_rewait(rlk_pubsub *ps, rlk_sub *s, rlk_armed *a, char *cmd, size_t len, int tail,
                      uint64_t wait)
{
    pthread_mutex_lock(&ps->mu);
    if (cmd != NULL) {
        free(a->cmd);
        a->cmd = cmd;
        a->len = len;
        a->tail = tail;
    }
    a->wait = wait;
    for (unsigned i = 0; s != NULL && i < RLK_PENDING_GRANTS; i++) {
        rlk_pending_grant *p = &s->grants[i];
        if (p->tag_len == a->tag_len && memcmp(p->tag, a->tag, p->tag_len) == 0) {
            p->tag_len = 0;
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

void rlk_armed_end_wait(rlk_pubsub *ps, rlk_sub *s, rlk_armed *armed)
{
    if (armed == NULL || s == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->mu);
    (void)rlk_grant_take_pending(s, armed);
    pthread_mutex_unlock(&ps->mu);
}

uint64_t rlk_armed_token(const rlk_armed *a)
{
    return a->token;
}

redisReply *rlk_armed_take_reply(rlk_armed *a)
{
    redisReply *r = a->reply;
    a->reply = NULL;
    return r;
}

void rlk_armed_free(rlk_armed *a)
{
    if (a == NULL) {
        return;
    }
    freeReplyObject(a->reply);
    pthread_cond_destroy(&a->cv);
    free(a->cmd);
    free(a);
}

uint64_t rlk_pubsub_armed_sent(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    uint64_t n = ps->armed_sent;
    pthread_mutex_unlock(&ps->mu);
    return n;
}
