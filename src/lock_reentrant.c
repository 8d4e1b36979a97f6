/*
 * The reentrant lock: Redisson's RLock data (a hash at the lock name, owner field = hold count,
 * PEXPIRE lease; release publishes "0" on redisson_lock__channel:{name}) plus a fencing token
 * counter redisson_lock_token:{name} incremented whenever the lock is taken from free. Static
 * helpers are named reentrant_*.
 */
#include "lock.h"
#include "scripts.h"

static int reentrant_channel(rlk_acq *a, rlk_buf *ch)
{
    return rlk_prefix_name(ch, "redisson_lock__channel", a->lock->name, a->lock->name_len);
}

/* The attempt's call: KEYS lock name + token counter (named in token_key), ARGV lease + field. */
static int reentrant_call(rlk_acq *a, rlk_buf *token_key, rlk_args *keys, rlk_args *args)
{
    rlock *l = a->lock;
    int r = rlk_prefix_name(token_key, "redisson_lock_token", l->name, l->name_len);
    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, token_key->p, token_key->len);
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->field, a->field_len);
    return r;
}

static int reentrant_attempt_reply(rlk_acq *a, redisReply *rep)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        return rlk_err(RLOCK_EPROTO, "lock_acquire on '%s': unexpected reply shape", a->lock->name);
    }
    if (rep->element[0]->integer == 1) {
        a->token = (uint64_t)rep->element[1]->integer;
        return 1;
    }
    a->ttl_ms = rep->element[1]->integer;
    return 0;
}

static int reentrant_attempt(rlk_acq *a)
{
    rlk_buf token_key;
    rlk_buf_init(&token_key);
    rlk_args keys, args;
    redisReply *rep = NULL;
    int r = reentrant_call(a, &token_key, &keys, &args);
    r = r ? r : rlk_script(a->client, RLK_SCRIPT_LOCK_ACQUIRE, 0, &keys, &args, &rep);
    rlk_buf_free(&token_key);
    if (r != RLOCK_OK) {
        return r;
    }
    r = reentrant_attempt_reply(a, rep);
    freeReplyObject(rep);
    return r;
}

static int reentrant_attempt_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_buf token_key;
    rlk_buf_init(&token_key);
    rlk_args keys, args;
    int r = reentrant_call(a, &token_key, &keys, &args);
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_ACQUIRE, &keys, &args, cmd, len);
    rlk_buf_free(&token_key);
    return r;
}

static int reentrant_release(rlk_acq *a)
{
    rlock *l = a->lock;
    rlk_buf ch;
    rlk_buf_init(&ch);
    int r = reentrant_channel(a, &ch);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_add(&keys, ch.p, ch.len);
    rlk_args_init(&args);
    rlk_args_addi(&args, a->lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_adds(&args, "0");
    redisReply *rep = NULL;
    long long v = 0;
    r = r ? r : rlk_script(a->client, RLK_SCRIPT_LOCK_RELEASE, 0, &keys, &args, &rep);
    r = r ? r : rlk_notify_reply(a->client, rep, &v, "lock_release");
    freeReplyObject(rep);
    rlk_buf_free(&ch);
    if (r != RLOCK_OK) {
        return r;
    }
    return v < 0 ? RLK_NOT_HELD : (int)v;
}

static int reentrant_force_unlock(rlock *l)
{
    rlk_buf ch;
    rlk_buf_init(&ch);
    int r = rlk_prefix_name(&ch, "redisson_lock__channel", l->name, l->name_len);
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_add(&keys, ch.p, ch.len);
    rlk_args_init(&args);
    rlk_args_adds(&args, "0");
    redisReply *rep = NULL;
    long long v = 0;
    r = r ? r
          : rlk_script(l->client, RLK_SCRIPT_LOCK_FORCE_RELEASE, RLK_IDEMPOTENT, &keys, &args,
                       &rep);
    r = r ? r : rlk_notify_reply(l->client, rep, &v, "lock_force_release");
    freeReplyObject(rep);
    rlk_buf_free(&ch);
    return r ? r : (int)v;
}

static const rlk_renew_class reentrant_renew = {
    .script = RLK_SCRIPT_RENEW_HASH,
    .describe = rlk_hold_describe,
    .lost = rlk_hold_on_lost,
};

static const rlk_single_ops reentrant_single = {
    .attempt = reentrant_attempt,
    .channel = reentrant_channel,
    .release = reentrant_release,
    .renew = &reentrant_renew,
    .attempt_format = reentrant_attempt_format,
    .attempt_reply = reentrant_attempt_reply,
};

static const rlk_lock_ops reentrant_ops = {
    .acquire = rlk_single_acquire,
    .unlock = rlk_single_unlock,
    .force_unlock = reentrant_force_unlock,
    .is_locked = rlk_hash_is_locked,
    .is_held = rlk_single_is_held,
    .hold_count = rlk_single_hold_count,
    .ttl = rlk_single_ttl,
    .token = rlk_single_token,
    .destroy = rlk_single_destroy,
};

rlock *rlk_reentrant_open(rlock_client *c, const char *name)
{
    return rlk_single_new(c, RLOCK_REENTRANT, name, &reentrant_ops, &reentrant_single);
}
