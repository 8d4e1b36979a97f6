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
#include "loop_reentrant.h"
#include "loop_sync.h"
#include "scripts.h"

/* The release's request: lock_release.lua with the lock's channel, waiters zset and wake
 * prefix, so a waiting rlock thread is named and a Redisson waiter gets "0"; no grant keys (a
 * loop release wakes, it does not grant). */
int rlk_loop_reentrant_release_format(rlock *l, rlk_acq *a, int64_t lease_ms, char **cmd,
                                      size_t *len)
{
    static const char *const prefixes[3] = {"redisson_lock__channel", "rlock_lock_waiters",
                                            "rlock_lock_wake"};
    rlk_buf names[3];
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    int r = RLOCK_OK;
    for (int i = 0; i < 3; i++) {
        rlk_buf_init(&names[i]);
        r = r ? r : rlk_prefix_name(&names[i], prefixes[i], l->name, l->name_len);
        rlk_args_add(&keys, names[i].p, names[i].len);
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_adds(&args, "0");
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_RELEASE, &keys, &args, cmd, len);
    for (int i = 0; i < 3; i++) {
        rlk_buf_free(&names[i]);
    }
    return r;
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

static int lre_decode(rlk_loop_lock_op *op, redisReply *rep)
{
    return op->a.lock->single->attempt_reply(&op->a, rep);
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

static const rlk_loop_wait_ops lre_ops = {
    .attempt = lre_attempt,
    .join = rlk_loop_lock_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_lock_complete,
    .give_back = rlk_loop_reentrant_give_back,
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
