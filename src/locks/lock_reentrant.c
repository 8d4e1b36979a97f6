/*
 * The reentrant lock: Redisson's RLock data plus a fencing token counter. Beyond Redisson, a
 * release reaches one waiting rlock client (named on its client's wake channel, or granted the
 * lock directly) and publishes Redisson's "0" only when a Redisson waiter listens.
 * docs/locks/reentrant.md explains the design. Also the spin lock's handles (RLOCK_SPIN: same
 * data, a polling wait in lock_spin.c). Static helpers are named reentrant_*.
 */
#include <stdlib.h>

#include "error.h"
#include "lock.h"
#include "lock_extend.h"
#include "lock_hold.h"
#include "lock_reentrant.h"
#include "lock_spin.h"
#include "lock_wait.h"
#include "release_reply.h"
#include "scripts.h"
#include "lock_heartbeat.h"

/* What a waiting thread keeps for its wait (in rlk_acq.scratch). */
typedef struct reentrant_wait {
    rlk_waiter_hb *hb;
    rlk_sub *wake; /* the wake channel's entry */
} reentrant_wait;

/* The derived names of a lock that waiting and releasing use. */
typedef struct reentrant_names {
    rlk_buf channel; /* redisson_lock__channel:{name} */
    rlk_buf waiters; /* rlock_lock_waiters:{name} */
    rlk_buf wake;    /* rlock_lock_wake:{name}, the prefix of every client's wake channel */
    rlk_buf token;   /* redisson_lock_token:{name} */
    rlk_buf grant;   /* rlock_lock_waiters:{name}:grants, the grant TTLs */
} reentrant_names;

static void reentrant_names_free(reentrant_names *n)
{
    rlk_buf_free(&n->channel);
    rlk_buf_free(&n->waiters);
    rlk_buf_free(&n->wake);
    rlk_buf_free(&n->token);
    rlk_buf_free(&n->grant);
}

static int reentrant_names_make(const rlock *l, reentrant_names *n)
{
    rlk_buf_init(&n->channel);
    rlk_buf_init(&n->waiters);
    rlk_buf_init(&n->wake);
    rlk_buf_init(&n->token);
    rlk_buf_init(&n->grant);
    int r = rlk_prefix_name(&n->channel, "redisson_lock__channel", l->name, l->name_len);
    r = r ? r : rlk_prefix_name(&n->waiters, "rlock_lock_waiters", l->name, l->name_len);
    r = r ? r : rlk_prefix_name(&n->wake, "rlock_lock_wake", l->name, l->name_len);
    r = r ? r : rlk_prefix_name(&n->token, "redisson_lock_token", l->name, l->name_len);
    r = r ? r : rlk_grant_name(&n->grant, l->name, l->name_len);
    if (r != RLOCK_OK) {
        reentrant_names_free(n);
    }
    return r;
}

static int reentrant_channel(rlk_acq *a, rlk_buf *ch)
{
    return rlk_prefix_name(ch, "redisson_lock__channel", a->lock->name, a->lock->name_len);
}

/* The attempt's call: KEYS lock name, token counter, waiters zset, waiting flag and grant hash
 * (the last four named in names, one after the other), ARGV lease, field, the liveness timeout of
 * a waiter (0 for a retry that no longer queues), whether the caller waits already, the TTL a
 * release's grant gives it (rlk_grant_ttl) and the lock call's id, which the grant's message
 * repeats. An attempt that records nobody (brief, or a caller that cannot wait) sends only the
 * first two keys and arguments. */
static int reentrant_call(rlk_acq *a, int brief, rlk_buf *names, rlk_args *keys, rlk_args *args)
{
    rlock *l = a->lock;
    size_t end[4];
    static const char *const prefixes[3] = {"redisson_lock_token", "rlock_lock_waiters",
                                            "rlock_lock_wake"};
    int r = RLOCK_OK;
    for (int i = 0; i < 4; i++) {
        r = r       ? r
            : i < 3 ? rlk_prefix_name(names, prefixes[i], l->name, l->name_len)
                    : rlk_grant_name(names, l->name, l->name_len);
        end[i] = names->len;
    }
    /* A caller that does not wait (a single attempt, a spin lock) is never recorded and is no
     * waiter: the lock and its counter, lease and field do, as absent keys and arguments mean
     * to the script. */
    int recorded = !brief && (a->may_queue || a->scratch != NULL);
    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    for (int i = 0; i < (recorded ? 4 : 1) && r == RLOCK_OK; i++) {
        size_t start = i == 0 ? 0 : end[i - 1];
        rlk_args_add(keys, names->p + start, end[i] - start);
    }
    rlk_args_init(args);
    rlk_args_addi(args, a->lease_ms);
    rlk_args_add(args, a->field, a->field_len);
    if (!recorded) {
        return r;
    }
    rlk_args_addi(args, a->may_queue ? a->client->opts.waiter_timeout_ms : 0);
    /* Waiting (wait_begin ran): a grant must take this thread out of the waiters zset. */
    rlk_args_adds(args, a->scratch != NULL ? "1" : "0");
    rlk_args_addi(args, rlk_grant_ttl(a));
    rlk_args_addi(args, (int64_t)a->wait_id);
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

/* The handles on which this thread found the lock busy lately, newest first (see
 * reentrant_attempt). A freed handle's address reused by another only costs that one a round
 * trip. */
#define REENTRANT_BUSY_SLOTS 4
static _Thread_local const rlock *g_busy[REENTRANT_BUSY_SLOTS];

static int reentrant_met_busy(const rlock *l)
{
    for (int i = 0; i < REENTRANT_BUSY_SLOTS; i++) {
        if (g_busy[i] == l) {
            return 1;
        }
    }
    return 0;
}

static void reentrant_note_busy(const rlock *l)
{
    for (int i = REENTRANT_BUSY_SLOTS - 1; i > 0; i--) {
        g_busy[i] = g_busy[i - 1];
    }
    g_busy[0] = l;
}

/* One attempt; brief: without the waiters' keys and arguments (it records nobody). */
static int reentrant_attempt_as(rlk_acq *a, int brief)
{
    rlk_buf names;
    rlk_buf_init(&names);
    rlk_args keys, args;
    redisReply *rep = NULL;
    int r = reentrant_call(a, brief, &names, &keys, &args);
    r = r ? r : rlk_script(a->client, RLK_SCRIPT_LOCK_ACQUIRE, 0, &keys, &args, &rep);
    rlk_buf_free(&names);
    if (r != RLOCK_OK) {
        return r;
    }
    r = reentrant_attempt_reply(a, rep);
    freeReplyObject(rep);
    return r;
}

/* A first attempt that may wait records its thread as a waiter when the lock is busy, which takes
 * the waiters' keys and arguments: 11 values to Redis against 4, each a string and a table slot
 * per call, on every uncontended lock. On a handle this thread has not found busy lately the
 * first attempt goes without them, and if the lock is busy after all, the full attempt follows
 * at once: one round trip more the first time, none while the lock stays contended. */
static int reentrant_attempt(rlk_acq *a)
{
    if (a->may_queue && a->scratch == NULL && !reentrant_met_busy(a->lock)) {
        int r = reentrant_attempt_as(a, 1);
        if (r != 0) {
            return r;
        }
        reentrant_note_busy(a->lock);
    }
    return reentrant_attempt_as(a, 0);
}

static int reentrant_attempt_format(rlk_acq *a, char **cmd, size_t *len)
{
    rlk_buf names;
    rlk_buf_init(&names);
    rlk_args keys, args;
    int r = reentrant_call(a, 0, &names, &keys, &args);
    r = r ? r : rlk_script_format(RLK_SCRIPT_LOCK_ACQUIRE, &keys, &args, cmd, len);
    rlk_buf_free(&names);
    return r;
}

static int reentrant_release(rlk_acq *a)
{
    rlock *l = a->lock;
    reentrant_names n;
    int r = reentrant_names_make(l, &n);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, l->name, l->name_len);
    rlk_args_add(&keys, n.channel.p, n.channel.len);
    rlk_args_add(&keys, n.waiters.p, n.waiters.len);
    rlk_args_add(&keys, n.wake.p, n.wake.len);
    if (rlk_grants_on(a->client)) { /* without them the release grants nothing */
        rlk_args_add(&keys, n.token.p, n.token.len);
        rlk_args_add(&keys, n.grant.p, n.grant.len);
    }
    rlk_args_init(&args);
    rlk_args_addi(&args, a->lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    rlk_args_adds(&args, "0");
    redisReply *rep = NULL;
    long long v = 0;
    r = rlk_script(a->client, RLK_SCRIPT_LOCK_RELEASE, 0, &keys, &args, &rep);
    r = r ? r : rlk_notify_reply(a->client, rep, &v, "lock_release");
    freeReplyObject(rep);
    reentrant_names_free(&n);
    if (r != RLOCK_OK) {
        return r;
    }
    return v < 0 ? RLK_NOT_HELD : (int)v;
}

/* A waiter's liveness heartbeat (lock_heartbeat.h), its member being its owner field. A
 * heartbeat that could not be delivered for a whole timeout needs no action: the zset entry
 * expires, and the waiter's next attempt records it again. */
static const rlk_renew_class reentrant_waiter_class = {
    .script = RLK_SCRIPT_LOCK_WAITER_HEARTBEAT,
    .describe = rlk_waiter_hb_describe,
    .lost = rlk_waiter_hb_lost,
    .release = rlk_waiter_hb_release,
};

/* Starts the heartbeat of the waiter the first attempt recorded, and joins the wake channel (the
 * wait loop has joined Redisson's channel, its twin, already). */
static int reentrant_wait_begin(rlk_acq *a)
{
    reentrant_wait *w = calloc(1, sizeof(*w));
    reentrant_names n;
    if (w == NULL) {
        return rlk_err(RLOCK_ENOMEM, "out of memory waiting for lock '%s'", a->lock->name);
    }
    a->scratch = w;
    int r = reentrant_names_make(a->lock, &n);
    if (r != RLOCK_OK) {
        return r;
    }
    r = rlk_waiter_hb_start(a, &reentrant_waiter_class, a->field, a->field_len, &w->hb);
    /* This client's own wake channel: a release naming one of its threads reaches it alone. */
    r = r ? r : rlk_buf_appends(&n.wake, ":");
    r = r ? r : rlk_buf_appends(&n.wake, a->client->uuid);
    r = r ? r
          : rlk_sub_join_named(a->client->pubsub, n.wake.p, n.wake.len, n.channel.p, n.channel.len,
                               &w->wake);
    reentrant_names_free(&n);
    return r;
}

/* Ends a wait on every way out: the heartbeat stops before the zset entry goes, so it cannot be
 * put back afterwards; a waiter that gives up leaves the zset and passes on a wake-up it may
 * have been named for. A grant already took the waiter out of the zset; a grant that came as
 * the waiter gave up is reported (1) for the wait loop to keep or pass on; a leave that failed
 * reports its error. */
static int reentrant_wait_end(rlk_acq *a, int acquired)
{
    reentrant_wait *w = a->scratch;
    reentrant_names n;
    redisReply *rep = NULL;
    a->scratch = NULL;
    if (w != NULL) {
        rlk_waiter_hb_stop(a, &w->hb);
        rlk_sub_leave(a->client->pubsub, w->wake);
        free(w);
    }
    if (acquired || reentrant_names_make(a->lock, &n) != RLOCK_OK) {
        return 0;
    }
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, n.waiters.p, n.waiters.len);
    rlk_args_add(&keys, n.wake.p, n.wake.len);
    rlk_args_add(&keys, a->lock->name, a->lock->name_len);
    rlk_args_add(&keys, n.grant.p, n.grant.len);
    rlk_args_add(&keys, n.token.p, n.token.len);
    rlk_args_init(&args);
    rlk_args_add(&args, a->field, a->field_len);
    /* On failure the entry expires after waiter_timeout_ms without heartbeats; until then a
     * release may grant this thread the lock, which its next lock or unlock settles
     * (lock_release.c). */
    int granted =
        rlk_script(a->client, RLK_SCRIPT_LOCK_WAITER_LEAVE, RLK_IDEMPOTENT, &keys, &args, &rep);
    if (granted == RLOCK_OK) {
        granted = rlk_leave_granted(a, rep);
        freeReplyObject(rep);
    }
    reentrant_names_free(&n);
    return granted;
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
    .channel_pattern = 1,
    .wait_begin = reentrant_wait_begin,
    .wait_end = reentrant_wait_end,
    .release = reentrant_release,
    .renew = &reentrant_renew,
    .attempt_format = reentrant_attempt_format,
    .attempt_reply = reentrant_attempt_reply,
    .extend = rlk_hash_extend,
};

static const rlk_lock_ops reentrant_ops = {
    RLK_SINGLE_LOCK_OPS(reentrant_force_unlock, rlk_hash_is_locked),
};

rlock *rlk_reentrant_open(rlock_client *c, const char *name)
{
    return rlk_single_new(c, RLOCK_REENTRANT, name, &reentrant_ops, &reentrant_single);
}

/* The spin lock's attempt: the reentrant lock's, but never recorded as a waiter (it listens to
 * nothing, so a release must not name it) and never registering a grant. */
static int reentrant_spin_attempt(rlk_acq *a)
{
    a->may_queue = 0;
    return reentrant_attempt_as(a, 0);
}

/* RLOCK_SPIN: the reentrant lock's data, attempts and releases (a release still wakes the
 * reentrant lock's waiters on the same name), and a wait that polls (lock_spin.c). */
static const rlk_single_ops reentrant_spin_single = {
    .attempt = reentrant_spin_attempt,
    .release = reentrant_release,
    .renew = &reentrant_renew,
    .wait = rlk_spin_wait,
    .extend = rlk_hash_extend,
};

rlock *rlk_spin_open(rlock_client *c, const char *name)
{
    return rlk_single_new(c, RLOCK_SPIN, name, &reentrant_ops, &reentrant_spin_single);
}

/* The attempt for loop clients (lock_reentrant.h). */
int rlk_reentrant_attempt_format(rlk_acq *a, char **cmd, size_t *len)
{
    return reentrant_attempt_format(a, cmd, len);
}

int rlk_reentrant_attempt_reply(rlk_acq *a, redisReply *rep)
{
    return reentrant_attempt_reply(a, rep);
}
