/*
 * The read-write lock: Redisson's RReadWriteLock data, opened as two handles (RLOCK_READ and
 * RLOCK_WRITE) over the generic wait loop. Beyond Redisson: waiting writers recorded in a zset
 * keep new readers out (not starved) and are woken one at a time on their own channels; read ->
 * write is RLOCK_EDEADLK; a downgrade wakes readers; a lease is never shortened.
 * docs/locks/rw.md explains the design. Static helpers are named rw_*.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client_fork.h"
#include "error.h"
#include "lock.h"
#include "lock_extend.h"
#include "lock_hold.h"
#include "lock_query.h"
#include "lock_rw.h"
#include "lock_rw_decode.h"
#include "release_reply.h"
#include "scripts.h"
#include "lock_heartbeat.h"

#define RW_TIMEOUT_SUFFIX ":rwlock_timeout"

/* Names derived once per handle from the lock name (immutable while the handle lives). */
typedef struct rw_impl {
    rlk_buf channel; /* redisson_rwlock:{name} */
    rlk_buf token;   /* redisson_lock_token:{name} */
    rlk_buf writers; /* rlock_rwlock_writers:{name} */
    /* rlock_rwlock_writer:{name}; + ":" + write field = a waiting writer's own channel */
    rlk_buf wchan;
    rlk_buf prefix; /* {name}, or name itself when it carries a hash tag */
} rw_impl;

static rw_impl *rw_of(const rlock *l)
{
    return (rw_impl *)l->impl;
}

static int rw_writer_preferring(const rlock *l)
{
    return l->client->opts.rw_reader_preferring == 0;
}

/* Appends the calling owner's timeout-key prefix, {name}:<uuid>:<tid>:rwlock_timeout. */
static int rw_timeout_prefix(const rlk_acq *a, rlk_buf *b)
{
    char suffix[RLK_OWNER_MAX + sizeof(RW_TIMEOUT_SUFFIX)];

    memcpy(suffix, a->owner, a->owner_len);
    memcpy(suffix + a->owner_len, RW_TIMEOUT_SUFFIX, sizeof(RW_TIMEOUT_SUFFIX));
    return rlk_suffix_name(b, a->lock->name, a->lock->name_len, suffix);
}

/* Writes the write field of an owner ("<owner>:write", Redisson's) into out (RLK_OWNER_MAX
 * bytes): the write side's hash_field hook, and what a reader names to recognise its own
 * thread's write hold. */
_Static_assert(
    36 + 1 + 20 + sizeof(":write") <= RLK_OWNER_MAX,
    "a write field (uuid, ':', up to 20 digits, \":write\", NUL) must fit RLK_OWNER_MAX");

static size_t rw_write_field(const char *owner, size_t owner_len, char *out)
{
    memcpy(out, owner, owner_len);
    memcpy(out + owner_len, ":write", sizeof(":write"));
    return owner_len + sizeof(":write") - 1;
}

/* Decodes the {status, value} reply of both acquire scripts into a. */
static int rw_acquire_reply(rlk_acq *a, const redisReply *r)
{
    long long status = 0;
    long long value = 0;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        rlk_reply_int(r->element[0], &status, "rw acquire status") != RLOCK_OK ||
        rlk_reply_int(r->element[1], &value, "rw acquire value") != RLOCK_OK) {
        return rlk_err(RLOCK_EPROTO, "unexpected reply to the read-write lock acquire script");
    }
    if (status == 1) {
        a->token = value > 0 ? (uint64_t)value : 0;
        return 1;
    }
    if (status == -1) {
        return rlk_err(RLOCK_EDEADLK,
                       "the calling thread holds the read side of '%s': asking for "
                       "the write side would wait for itself (no upgrade)",
                       a->lock->name);
    }
    a->ttl_ms = value >= 0 ? value : -1;
    return 0;
}

/* The read attempt's call (rw_read_acquire.lua's KEYS and ARGV); tp holds the owner's
 * timeout-key prefix and wfield its write field, both kept by the caller until it is sent. */
static void rw_read_call(rlk_acq *a, const rlk_buf *tp, const char *wfield, size_t wlen,
                         rlk_args *keys, rlk_args *args)
{
    rlock *l = a->lock;
    const rw_impl *rw = rw_of(l);

    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, tp->p, tp->len);
    rlk_args_add(keys, rw->token.p, rw->token.len);
    rlk_args_add(keys, rw->writers.p, rw->writers.len);
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->owner, a->owner_len);
    rlk_args_add(args, wfield, wlen);
    rlk_args_addi(args, rw_writer_preferring(l));
}

static int rw_read_attempt(rlk_acq *a)
{
    char wfield[RLK_OWNER_MAX];
    size_t wlen = rw_write_field(a->owner, a->owner_len, wfield);
    rlk_buf tp;
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    int rc;

    rlk_buf_init(&tp);
    rc = rw_timeout_prefix(a, &tp);
    if (rc == RLOCK_OK) {
        rw_read_call(a, &tp, wfield, wlen, &keys, &args);
        rc = rlk_script(a->client, RLK_SCRIPT_RW_READ_ACQUIRE, 0, &keys, &args, &r);
    }
    rlk_buf_free(&tp);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rc = rw_acquire_reply(a, r);
    freeReplyObject(r);
    return rc;
}

/* The write attempt's call (rw_write_acquire.lua's KEYS and ARGV). */
static void rw_write_call(rlk_acq *a, rlk_args *keys, rlk_args *args)
{
    rlock *l = a->lock;
    const rw_impl *rw = rw_of(l);
    int queue = rw_writer_preferring(l) && a->may_queue;

    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, rw->token.p, rw->token.len);
    rlk_args_add(keys, rw->writers.p, rw->writers.len);
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->field, a->field_len);
    rlk_args_add(args, a->owner, a->owner_len);
    rlk_args_addi(args, queue ? a->client->opts.waiter_timeout_ms : 0);
}

static int rw_write_attempt(rlk_acq *a)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    int rc;

    rw_write_call(a, &keys, &args);
    rc = rlk_script(a->client, RLK_SCRIPT_RW_WRITE_ACQUIRE, 0, &keys, &args, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rc = rw_acquire_reply(a, r);
    freeReplyObject(r);
    return rc;
}

/* Arms a waiting writer's attempt (lock.h, attempt_format): its private channel gets "0" when
 * it is the one writer a release wakes, and the subscriber thread then sends this attempt at
 * once, as for the fair lock's waiters. */
static int rw_write_attempt_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_args keys;
    rlk_args args;

    rw_write_call(a, &keys, &args);
    return rlk_script_format(RLK_SCRIPT_RW_WRITE_ACQUIRE, &keys, &args, cmd, len);
}

static int rw_write_attempt_reply(rlk_acq *a, redisReply *r)
{
    return rw_acquire_reply(a, r);
}

/* Readers (and writers of a reader-preferring client) wait on Redisson's channel. A waiting writer
 * of a writer-preferring client waits on its own channel: on the shared one, the wake-up it needs
 * (the lock became free) could be consumed by a reader of the same process that must keep waiting
 * behind it, since wake-ups of one channel are shared by its local waiters. */
static int rw_channel(rlk_acq *a, rlk_buf *ch)
{
    const rw_impl *rw = rw_of(a->lock);
    int rc;

    if (a->lock->kind != RLOCK_WRITE || !rw_writer_preferring(a->lock)) {
        return rlk_buf_append(ch, rw->channel.p, rw->channel.len);
    }
    rc = rlk_buf_append(ch, rw->wchan.p, rw->wchan.len);
    rc = rc != RLOCK_OK ? rc : rlk_buf_appends(ch, ":");
    return rc != RLOCK_OK ? rc : rlk_buf_append(ch, a->field, a->field_len);
}

/* A waiting writer's liveness heartbeat (lock_heartbeat.h), its member being its write field.
 * A heartbeat that could not be delivered for a whole timeout needs no action: the zset entry
 * expires, and the writer's next attempt records it again. */
static const rlk_renew_class rw_waiter_class = {
    .script = RLK_SCRIPT_RW_WRITER_HEARTBEAT,
    .describe = rlk_waiter_hb_describe,
    .lost = rlk_waiter_hb_lost,
    .release = rlk_waiter_hb_release,
};

static int rw_write_wait_begin(rlk_acq *a)
{
    rlk_waiter_hb *w = NULL;
    int rc;

    if (!rw_writer_preferring(a->lock) || !a->may_queue) {
        return RLOCK_OK;
    }
    rc = rlk_waiter_hb_start(a, &rw_waiter_class, a->field, a->field_len, &w);
    a->scratch = w;
    return rc;
}

/* A waiting writer's leave (rw_writer_leave.lua's KEYS and ARGV). */
static void rw_leave_call(rlk_acq *a, rlk_args *keys, rlk_args *args)
{
    const rw_impl *rw = rw_of(a->lock);

    rlk_args_init(keys);
    rlk_args_add(keys, rw->writers.p, rw->writers.len);
    rlk_args_add(keys, rw->channel.p, rw->channel.len);
    rlk_args_add(keys, rw->wchan.p, rw->wchan.len);
    rlk_args_init(args);
    rlk_args_add(args, a->field, a->field_len);
}

/* Ends a writer's wait: the heartbeat stops before the zset entry goes, so it cannot be put back
 * afterwards. A writer that gives up leaves the zset and wakes the readers queued behind it. */
static int rw_write_wait_end(rlk_acq *a, int acquired)
{
    rlk_waiter_hb *w = a->scratch;
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;

    rlk_waiter_hb_stop(a, &w);
    a->scratch = NULL;
    if (acquired || !rw_writer_preferring(a->lock) || !a->may_queue) {
        return 0;
    }
    rw_leave_call(a, &keys, &args);
    /* On failure the entry expires after waiter_timeout_ms without heartbeats, or when the
     * thread's next lock or unlock leaves again (lock_release.c). */
    int rc = rlk_script(a->client, RLK_SCRIPT_RW_WRITER_LEAVE, RLK_IDEMPOTENT, &keys, &args, &r);
    if (rc == RLOCK_OK) {
        freeReplyObject(r);
    }
    return rc;
}

/* Maps the -1/0/1 reply of both release scripts onto the rlk_single_ops contract. */
static int rw_release_reply(rlock_client *c, redisReply *r)
{
    long long v = 0;
    int rc = rlk_notify_reply(c, r, &v, "rw release");

    freeReplyObject(r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (v < 0) {
        return RLK_NOT_HELD;
    }
    return v > 0 ? 1 : 0;
}

/* A release's call (rw_read_release.lua's or rw_write_release.lua's KEYS and ARGV); tp holds
 * the owner's timeout-key prefix, kept by the caller until it is sent. */
static void rw_release_call(rlk_acq *a, const rlk_buf *tp, rlk_args *keys, rlk_args *args)
{
    rlock *l = a->lock;
    const rw_impl *rw = rw_of(l);
    int write = l->kind == RLOCK_WRITE;

    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, rw->channel.p, rw->channel.len);
    rlk_args_add(keys, tp->p, tp->len);
    if (!write) {
        rlk_args_add(keys, rw->prefix.p, rw->prefix.len);
    }
    rlk_args_add(keys, rw->writers.p, rw->writers.len);
    rlk_args_add(keys, rw->wchan.p, rw->wchan.len);
    rlk_args_init(args);
    if (write) {
        rlk_args_add(args, a->field, a->field_len);
    }
    rlk_args_add(args, a->owner, a->owner_len);
}

static int rw_release(rlk_acq *a)
{
    int script =
        a->lock->kind == RLOCK_WRITE ? RLK_SCRIPT_RW_WRITE_RELEASE : RLK_SCRIPT_RW_READ_RELEASE;
    rlk_buf tp;
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    int rc;

    rlk_buf_init(&tp);
    rc = rw_timeout_prefix(a, &tp);
    if (rc == RLOCK_OK) {
        rw_release_call(a, &tp, &keys, &args);
        rc = rlk_script(a->client, script, 0, &keys, &args, &r);
    }
    rlk_buf_free(&tp);
    return rc != RLOCK_OK ? rc : rw_release_reply(a->client, r);
}

/* Watchdog entries of holds use lock_hold.c's describe (key = lock name, field = the read owner,
 * whose timeout keys the read script renews, or the write field) and lost handler. */
static const rlk_renew_class rw_read_renew = {
    .script = RLK_SCRIPT_RW_RENEW_READ,
    .describe = rlk_hold_describe,
    .lost = rlk_hold_on_lost,
};

static const rlk_renew_class rw_write_renew = {
    .script = RLK_SCRIPT_RW_RENEW_WRITE,
    .describe = rlk_hold_describe,
    .lost = rlk_hold_on_lost,
};

/* A read hold's extension also lengthens the owner's timeout keys, one per read hold. */
static int rw_read_extend(rlk_acq *a, int64_t lease_ms)
{
    rlk_buf prefix;
    rlk_buf_init(&prefix);
    int r = rw_timeout_prefix(a, &prefix);
    r = r ? r : rlk_hash_extend_read(a, lease_ms, &prefix);
    rlk_buf_free(&prefix);
    return r;
}
static void rw_impl_free(void *impl);

static const rlk_single_ops rw_read_single = {
    .attempt = rw_read_attempt,
    .channel = rw_channel,
    .release = rw_release,
    .renew = &rw_read_renew,
    .extend = rw_read_extend,
    .impl_free = rw_impl_free,
};

static const rlk_single_ops rw_write_single = {
    .attempt = rw_write_attempt,
    .channel = rw_channel,
    .wait_begin = rw_write_wait_begin,
    .wait_end = rw_write_wait_end,
    .release = rw_release,
    .renew = &rw_write_renew,
    .hash_field = rw_write_field,
    .attempt_format = rw_write_attempt_format,
    .attempt_reply = rw_write_attempt_reply,
    .extend = rlk_hash_extend,
    .impl_free = rw_impl_free,
};

static int rw_force_unlock(rlock *l)
{
    const rw_impl *rw = rw_of(l);
    int write = l->kind == RLOCK_WRITE;
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    long long v = 0;
    int rc = rlk_client_enter(l->client);

    if (rc != RLOCK_OK) {
        return rc;
    }
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_add(&keys, rw->channel.p, rw->channel.len);
    rlk_args_add(&keys, rw->writers.p, rw->writers.len);
    rlk_args_add(&keys, rw->wchan.p, rw->wchan.len);
    rlk_args_init(&args);
    rlk_args_adds(&args, write ? "write" : "read");
    rlk_args_adds(&args, write ? "1" : "0");
    rc = rlk_script(l->client, RLK_SCRIPT_RW_FORCE_RELEASE, RLK_IDEMPOTENT, &keys, &args, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rc = rlk_notify_reply(l->client, r, &v, "rw force release");
    freeReplyObject(r);
    return rc != RLOCK_OK ? rc : (v == 1);
}

static int rw_is_locked(rlock *l)
{
    rlk_args keys;
    rlk_args args;
    redisReply *r = NULL;
    long long v = 0;
    int rc = rlk_client_enter(l->client);

    if (rc != RLOCK_OK) {
        return rc;
    }
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_init(&args);
    rlk_args_adds(&args, l->kind == RLOCK_WRITE ? "write" : "read");
    rc = rlk_script(l->client, RLK_SCRIPT_RW_IS_LOCKED, RLK_IDEMPOTENT, &keys, &args, &r);
    if (rc != RLOCK_OK) {
        return rc;
    }
    rc = rlk_reply_int(r, &v, "rw is_locked");
    freeReplyObject(r);
    return rc != RLOCK_OK ? rc : (v == 1);
}

static void rw_impl_free(void *impl)
{
    rw_impl *rw = impl;
    if (rw != NULL) {
        rlk_buf_free(&rw->channel);
        rlk_buf_free(&rw->token);
        rlk_buf_free(&rw->writers);
        rlk_buf_free(&rw->prefix);
        rlk_buf_free(&rw->wchan);
        free(rw);
    }
}

/* Both sides: what differs between them is in their rlk_single_ops and the :write hook. */
static const rlk_lock_ops rw_ops = {
    RLK_SINGLE_LOCK_OPS(rw_force_unlock, rw_is_locked),
};

static rw_impl *rw_impl_new(const char *name, size_t len)
{
    rw_impl *rw = calloc(1, sizeof(*rw));
    int rc;

    if (rw == NULL) {
        return NULL;
    }
    rlk_buf_init(&rw->channel);
    rlk_buf_init(&rw->token);
    rlk_buf_init(&rw->writers);
    rlk_buf_init(&rw->prefix);
    rlk_buf_init(&rw->wchan);
    rc = rlk_prefix_name(&rw->channel, "redisson_rwlock", name, len);
    if (rc == RLOCK_OK) {
        rc = rlk_prefix_name(&rw->token, "redisson_lock_token", name, len);
    }
    if (rc == RLOCK_OK) {
        rc = rlk_prefix_name(&rw->writers, "rlock_rwlock_writers", name, len);
    }
    if (rc == RLOCK_OK) {
        rc = rlk_prefix_name(&rw->wchan, "rlock_rwlock_writer", name, len);
    }
    /* Redisson's key prefix of the timeout keys: suffixName(name, "") without its ':'. */
    if (rc == RLOCK_OK && memchr(name, '{', len) != NULL) {
        rc = rlk_buf_append(&rw->prefix, name, len);
    } else if (rc == RLOCK_OK) {
        rc = rlk_buf_appends(&rw->prefix, "{");
        rc = rc != RLOCK_OK ? rc : rlk_buf_append(&rw->prefix, name, len);
        rc = rc != RLOCK_OK ? rc : rlk_buf_appends(&rw->prefix, "}");
    }
    if (rc != RLOCK_OK) {
        rw_impl_free(rw);
        return NULL;
    }
    return rw;
}

rlock *rlk_rw_open(rlock_client *c, rlock_kind kind, const char *name)
{
    int write = kind == RLOCK_WRITE;
    rlock *l = rlk_single_new(c, kind, name, &rw_ops, write ? &rw_write_single : &rw_read_single);
    rw_impl *rw;

    if (l == NULL) {
        return NULL;
    }
    rw = rw_impl_new(l->name, l->name_len);
    if (rw == NULL) {
        rlock_free(l);
        rlk_err(RLOCK_ENOMEM, "out of memory opening read-write lock '%s'", name);
        return NULL;
    }
    l->impl = rw;
    return l;
}

/* The decoders above, for lock_rw_decode.h (fuzzing without a connection). */
int rlk_rw_check_acquire_reply(rlk_acq *a, const redisReply *r)
{
    return rw_acquire_reply(a, r);
}

int rlk_rw_check_release_reply(rlock_client *c, redisReply *r)
{
    return rw_release_reply(c, r);
}

/* The requests for loop clients (lock_rw.h). */
int rlk_rw_attempt_format(rlk_acq *a, int *script, char **cmd, size_t *len)
{
    if (a->lock->kind == RLOCK_WRITE) {
        *script = RLK_SCRIPT_RW_WRITE_ACQUIRE;
        return rw_write_attempt_format(a, cmd, len);
    }
    char wfield[RLK_OWNER_MAX];
    size_t wlen = rw_write_field(a->owner, a->owner_len, wfield);
    rlk_buf tp;
    rlk_args keys;
    rlk_args args;
    rlk_buf_init(&tp);
    int rc = rw_timeout_prefix(a, &tp);
    if (rc == RLOCK_OK) {
        rw_read_call(a, &tp, wfield, wlen, &keys, &args);
        rc = rlk_script_format(RLK_SCRIPT_RW_READ_ACQUIRE, &keys, &args, cmd, len);
    }
    rlk_buf_free(&tp);
    *script = RLK_SCRIPT_RW_READ_ACQUIRE;
    return rc;
}

int rlk_rw_release_format(rlk_acq *a, int *script, char **cmd, size_t *len)
{
    *script =
        a->lock->kind == RLOCK_WRITE ? RLK_SCRIPT_RW_WRITE_RELEASE : RLK_SCRIPT_RW_READ_RELEASE;
    rlk_buf tp;
    rlk_args keys;
    rlk_args args;
    rlk_buf_init(&tp);
    int rc = rw_timeout_prefix(a, &tp);
    if (rc == RLOCK_OK) {
        rw_release_call(a, &tp, &keys, &args);
        rc = rlk_script_format(*script, &keys, &args, cmd, len);
    }
    rlk_buf_free(&tp);
    return rc;
}

int rlk_rw_writer_queues(const rlk_acq *a)
{
    return a->lock->kind == RLOCK_WRITE && rw_writer_preferring(a->lock) && a->may_queue;
}

int rlk_rw_writer_leave_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_args keys;
    rlk_args args;
    rw_leave_call(a, &keys, &args);
    return rlk_script_format(RLK_SCRIPT_RW_WRITER_LEAVE, &keys, &args, cmd, len);
}
