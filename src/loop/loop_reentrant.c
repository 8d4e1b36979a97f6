/*
 * The reentrant lock on a loop client (loop_reentrant.h): its attempt (the handle's own
 * formatter and decoder, lock_reentrant.c) as the table of a lock's waiting operation
 * (loop_lock_wait.h, loop_wait.h), and its release request, which the spin lock shares. Static
 * helpers are named lre_*.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "lock.h"
#include "lock_wait.h"
#include "loop_hold.h"
#include "loop_reentrant.h"
#include "loop_sync.h"
#include "pubsub.h"
#include "pubsub_decode.h"
#include "scripts.h"

/* The release of field's hold on the lock name: lock_release.lua with the lock's channel,
 * waiters zset, wake prefix, token counter and grant hash, so the earliest live rlock waiter
 * (a thread or a loop owner) is granted the lock and a Redisson waiter gets "0". */
static int lre_release_format(const char *name, size_t name_len, const char *field,
                              size_t field_len, int64_t lease_ms, char **cmd, size_t *len)
{
    static const char *const prefixes[5] = {"redisson_lock__channel", "rlock_lock_waiters",
                                            "rlock_lock_wake", "redisson_lock_token", NULL};
    rlk_buf names[5];
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, name, name_len);
    int r = RLOCK_OK;
    for (int i = 0; i < 5; i++) {
        rlk_buf_init(&names[i]);
        r = r             ? r
            : prefixes[i] ? rlk_prefix_name(&names[i], prefixes[i], name, name_len)
                          : rlk_grant_name(&names[i], name, name_len);
        rlk_args_add(&keys, names[i].p, names[i].len);
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, lease_ms);
    rlk_args_add(&args, field, field_len);
    rlk_args_adds(&args, "0");
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_RELEASE, &keys, &args, cmd, len);
    for (int i = 0; i < 5; i++) {
        rlk_buf_free(&names[i]);
    }
    return r;
}

int rlk_loop_reentrant_release_format(rlock *l, rlk_acq *a, int64_t lease_ms, char **cmd,
                                      size_t *len)
{
    return lre_release_format(l->name, l->name_len, a->field, a->field_len, lease_ms, cmd, len);
}

int rlk_loop_reentrant_give_back(rlk_loop_wait *w, rlk_lconn_reply_fn fn)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_loop_reentrant_release_format(op->a.lock, &op->a, op->a.lease_ms, &cmd, &len);
    r = r ? r : rlk_loop_eval(op->w.base.lc, RLK_SCRIPT_LOCK_RELEASE, cmd, len, fn, op);
    free(cmd);
    return r;
}

static void lre_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

/* The attempt's reply. A wait's first attempt goes without the waiters' arguments (an
 * uncontended lock costs Redisson's script); once it met the lock busy, the next records the
 * owner as a waiter with its grant TTL and wait id (lock_acquire.lua), and later ones say it
 * is recorded (a->scratch set, as the threaded wait_begin does), so a grant made to it is taken
 * as it stands. A recorded waiter sleeps a third of waiter_timeout_ms at most: each attempt
 * moves its entry's deadline on, the heartbeat of the loop's reentrant waiters. */
static int lre_decode(rlk_loop_lock_op *op, redisReply *rep)
{
    int r = op->a.lock->single->attempt_reply(&op->a, rep);
    if (r != 0 || op->a.wait_ms == 0 || op->a.client->sharded) {
        /* Sharded pub/sub has no patterns: such a waiter listens on Redisson's channel as a
         * Redisson waiter does (lre_join), and is not recorded for grants. */
        return r;
    }
    if (!op->a.may_queue) {
        op->a.may_queue = 1;
        return r;
    }
    int64_t beat = op->a.client->opts.waiter_timeout_ms / 3;
    beat = beat > 0 ? beat : 1;
    op->a.scratch = op;
    op->a.ttl_ms = op->a.ttl_ms >= 0 && op->a.ttl_ms < beat ? op->a.ttl_ms : beat;
    return r;
}

static void lre_on_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_lock_result(arg, rep, err, lre_decode);
}

static int lre_attempt(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    int r = op->a.lock->single->attempt_format(&op->a, &cmd, &len);
    r = r ? r
          : rlk_loop_eval_synced(w->base.lc, RLK_SCRIPT_LOCK_ACQUIRE, cmd, len, lre_on_reply, op);
    free(cmd);
    return r;
}

static const rlk_loop_wait_ops lre_ops;

/* A grant no waiting operation took: one whose wait is leaving is left to the leave's reply
 * (lock_waiter_leave.lua reports it), one an attempt took already (the owner holds the lock)
 * is done; any other (its wait ended) is given back, so no grant is left held. */
static int lre_unclaimed(rlk_loop_client *lc, const char *name, size_t name_len, const char *msg,
                         size_t len)
{
    uint64_t token = 0, wait = 0;
    size_t at = 0;
    if (!rlk_grant_parse(msg, len, &token, &wait, &at)) {
        return 0; /* a name no waiter took: every waiter attempts */
    }
    for (rlk_loop_op *o = lc->ops; o != NULL; o = o->next) {
        rlk_loop_wait *w = rlk_loop_wait_of(o);
        if (w != NULL && w->ops == &lre_ops &&
            RLK_CONTAINER_OF(w, rlk_loop_lock_op, w)->a.wait_id == wait) {
            return 1;
        }
    }
    const char *field = msg + at, *tid = strrchr(field, ':');
    rlk_loop_hold *h =
        tid == NULL
            ? NULL
            : rlk_loop_hold_get(lc, name, name_len, strtoull(tid + 1, NULL, 10), RLK_LOOP_HASH, 0);
    char *cmd = NULL;
    size_t clen = 0;
    if ((h == NULL || h->count == 0) &&
        lre_release_format(name, name_len, field, len - at, 1, &cmd, &clen) == RLOCK_OK) {
        (void)rlk_loop_eval(lc, RLK_SCRIPT_LOCK_RELEASE, cmd, clen, lre_ignore, NULL);
    }
    free(cmd);
    return 1;
}

/* A message on the client's wake channel: a grant to this wait ends it with the grant's token
 * (a client that syncs to replicas, or a wait whose attempt is on its way, attempts instead:
 * the attempt takes the grant as it stands, with WAIT behind it); a name of this owner wakes
 * it alone. */
static int lre_told(rlk_loop_wait *w, const char *msg, size_t len)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    uint64_t token = 0, wait = 0;
    size_t at = 0;
    int grant = rlk_grant_parse(msg, len, &token, &wait, &at);
    const char *who = msg + (grant ? at : 0);
    size_t n = len - (grant ? at : 0);
    if (!grant && n > 2 && memcmp(who + n - 2, " 0", 2) == 0) {
        n -= 2;
    }
    if (n != op->a.field_len || memcmp(who, op->a.field, n) != 0 ||
        (grant && wait != op->a.wait_id)) {
        return 0;
    }
    if (!grant || w->inflight || rlk_loop_synced(w->base.lc, -1)) {
        rlk_loop_wait_wake(w);
        return 1;
    }
    op->a.token = token;
    op->a.granted_ttl = rlk_grant_ttl(&op->a);
    rlk_loop_wait_result(w, 1, -1);
    return 1;
}

/* Listens on Redisson's channel through its literal pattern and on the client's wake channel
 * rlock_lock_wake:{name}:<uuid>, as a threaded waiter does. */
static int lre_join(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    if (op->a.client->sharded) {
        return rlk_loop_lock_join(w);
    }
    rlock *l = op->a.lock;
    rlk_buf ch;
    rlk_buf_init(&ch);
    size_t plen = 0;
    char *pat = NULL;
    int r = l->single->channel(&op->a, &ch);
    if (r == RLOCK_OK && (pat = rlk_literal_pattern(ch.p, ch.len, &plen)) == NULL) {
        r = rlk_err(RLOCK_ENOMEM, "lock '%s': out of memory joining its channel", l->name);
    }
    rlk_loop_named named = {.wake_prefix = "rlock_lock_wake",
                            .key = l->name,
                            .key_len = l->name_len,
                            .unclaimed = lre_unclaimed};
    r = r ? r : rlk_loop_join_named(&w->base, pat, plen, &named);
    free(pat);
    rlk_buf_free(&ch);
    return r;
}

/* lock_waiter_leave.lua for the recorded waiter op. */
static int lre_leave_format(rlk_loop_lock_op *op, char **cmd, size_t *len)
{
    rlock *l = op->a.lock;
    rlk_buf waiters, wake, grant, token;
    rlk_buf_init(&waiters);
    rlk_buf_init(&wake);
    rlk_buf_init(&grant);
    rlk_buf_init(&token);
    int r = rlk_prefix_name(&waiters, "rlock_lock_waiters", l->name, l->name_len);
    r = r ? r : rlk_prefix_name(&wake, "rlock_lock_wake", l->name, l->name_len);
    r = r ? r : rlk_grant_name(&grant, l->name, l->name_len);
    r = r ? r : rlk_prefix_name(&token, "redisson_lock_token", l->name, l->name_len);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, waiters.p, waiters.len);
    rlk_args_add(&keys, wake.p, wake.len);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_add(&keys, grant.p, grant.len);
    rlk_args_add(&keys, token.p, token.len);
    rlk_args_init(&args);
    rlk_args_add(&args, op->a.field, op->a.field_len);
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_WAITER_LEAVE, &keys, &args, cmd, len);
    rlk_buf_free(&waiters);
    rlk_buf_free(&wake);
    rlk_buf_free(&grant);
    rlk_buf_free(&token);
    return r;
}

/* The leave's reply: a release that granted the lock to the waiter before it left makes the
 * operation end taken (RLOCK_OK with the grant's token), never left held. */
static void lre_on_leave(void *arg, redisReply *rep, int err)
{
    rlk_loop_lock_op *op = arg;
    if (err == RLOCK_OK && rep->type != REDIS_REPLY_ERROR && rlk_leave_granted(&op->a, rep)) {
        rlk_loop_wait_result(&op->w, 1, -1);
        return;
    }
    if (err != RLOCK_OK || rep->type == REDIS_REPLY_ERROR) {
        rlk_log(op->a.client, RLOCK_LOG_WARN,
                "lock '%s': could not leave the waiters (%s); the entry expires after "
                "waiter_timeout_ms",
                op->a.lock->name, err != RLOCK_OK ? rlock_last_error() : rep->str);
    }
    rlk_loop_wait_left(&op->w, err);
}

/* The give-up of a recorded waiter: it leaves the waiters zset and the grant hash before done
 * runs. */
static int lre_leave(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    if (op->a.scratch == NULL) {
        return 0;
    }
    int r = lre_leave_format(op, &cmd, &len);
    r = r ? r : rlk_loop_eval(w->base.lc, RLK_SCRIPT_LOCK_WAITER_LEAVE, cmd, len, lre_on_leave, op);
    free(cmd);
    return r == RLOCK_OK;
}

/* The client is being freed: a recorded waiter's leave goes as the last request. */
static int lre_close_leave(rlk_loop_wait *w)
{
    rlk_loop_lock_op *op = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    if (op->a.scratch == NULL || !rlk_loop_can_send_last(w->base.lc)) {
        return 0;
    }
    int r = lre_leave_format(op, &cmd, &len);
    r = r ? r : rlk_loop_send_last(w->base.lc, RLK_SCRIPT_LOCK_WAITER_LEAVE, cmd, len);
    free(cmd);
    return r == RLOCK_OK;
}

static const rlk_loop_wait_ops lre_ops = {
    .attempt = lre_attempt,
    .join = lre_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_lock_complete,
    .leave = lre_leave,
    .close_leave = lre_close_leave,
    .give_back = rlk_loop_reentrant_give_back,
    .told = lre_told,
};

int rlk_loop_reentrant_lock_op(rlk_loop_client *lc, rlock *lock, uint64_t tid,
                               const rlock_lock_args *args, rlock_done_fn done, void *user_data,
                               rlk_loop_lock_op **out)
{
    rlk_loop_lock_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(op, lock, tid, args, done, user_data);
    op->w.ops = &lre_ops;
    op->a.wait_id = rlk_wait_id_next();
    int r = rlk_loop_lock_begin(lc, op, args->cancel);
    if (r != RLOCK_OK) {
        free(op);
        op = NULL;
    }
    if (out != NULL) {
        *out = op;
    }
    return r;
}

int rlk_loop_reentrant_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid,
                            const rlock_lock_args *args, rlock_done_fn done, void *user_data)
{
    return rlk_loop_reentrant_lock_op(lc, lock, tid, args, done, user_data, NULL);
}

int rlk_loop_reentrant_abandon(rlk_loop_lock_op *op)
{
    if (!op->w.inflight || op->w.leaving || op->w.done == NULL) {
        return 0;
    }
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_loop_reentrant_release_format(op->a.lock, &op->a, op->a.lease_ms, &cmd, &len);
    rlk_loop_back *b = r == RLOCK_OK ? malloc(sizeof(*b) + len) : NULL;
    if (b == NULL) {
        free(cmd);
        return 0;
    }
    b->len = len;
    memcpy(b->cmd, cmd, len);
    free(cmd);
    rlk_loop_op_remove(&op->w.base);
    rlk_loop_due_del(op->w.base.lc, &op->w.due);
    (void)rlk_obs_acquire_end(op->a.client, &op->obs, op->a.lock->name, op->a.owner, RLOCK_ECONN, 0,
                              0);
    op->w.done = NULL;
    op->on_lost = NULL;
    op->lost_ud = b;
    return 1;
}
