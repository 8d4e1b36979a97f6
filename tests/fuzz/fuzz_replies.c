/*
 * libFuzzer target: the checks every script caller applies to Redis' replies.
 *
 * The input is arbitrary bytes read as RESP by hiredis' own reader (redisReader, the code that
 * parses replies off a connection), so the replies are exactly what a hostile or broken server
 * could make hiredis hand to rlock. Each reply goes through the decoders the callers use:
 * attempt replies of the reentrant, fair, read and write locks (through rlk_single_ops, as the
 * armed-attempt path calls them), the read-write release decoder, rlk_reply_int (releases, force
 * releases, queries), the publishing scripts' {result, refusal} decoder, the NOSCRIPT test, the
 * RedLock round's acquire/raise/query decoders (multi-locks decode through their members), the
 * watchdog's batch renewal decoder, the subscriber's push parsing and message permits, and
 * rlock_inspect()'s decoder (the *_decode.h headers). The handles sit on a client that is never
 * started: decoding needs no connection. A decoder must return a documented code, never crash or
 * leak.
 */
#include <hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "lock.h"
#include "lock_query.h"
#include "pool.h"
#include "inspect_decode.h"
#include "lock_redlock_decode.h"
#include "lock_rw_decode.h"
#include "pubsub_decode.h"
#include "release_reply.h"
#include "watchdog_decode.h"
#include "fuzz_resp.h"
#include "rlock.h"

#define MAX_REPLIES 16

static rlock_client *client;
static rlock *handles[4];

/* A client struct with an identity and nothing started: enough to open handles on. */
static void setup(void)
{
    static const rlock_kind kinds[4] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};

    if (client != NULL) {
        return;
    }
    client = calloc(1, sizeof(*client));
    if (client == NULL) {
        abort();
    }
    rlock_options_init(&client->opts);
    memcpy(client->uuid, "00000000-0000-4000-8000-000000000000", 37);
    atomic_init(&client->refs, 1);
    atomic_init(&client->closed, 0);
    for (int i = 0; i < 4; i++) {
        handles[i] = rlock_open(client, kinds[i], "fuzz");
        if (handles[i] == NULL) {
            abort();
        }
    }
}

/* Attempt replies return 1 (acquired), 0 (busy) or a negative RLOCK_E* code. */
static void check_attempt(int rc)
{
    if (rc > 1 || rc < RLOCK_EAUTH) {
        abort();
    }
}

/* RedLock decodes each server's reply of a round on its own. */
static void check_redlock(const redisReply *r)
{
    uint64_t token = 0;
    int got = rlk_redlock_check_acquire_reply(r, &token);
    int one = rlk_redlock_check_query_reply(r);
    if (got < -1 || got > 1 || one < -1 || one > 1) {
        abort();
    }
    if ((unsigned)rlk_redlock_check_raise_reply(r, token) > 1) {
        abort();
    }
}

/* A batch renewal reply for as many entries as the reply has elements (one for a non-array). */
static void check_watchdog(const redisReply *r)
{
    size_t n = r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->elements <= RLK_WD_BATCH
                   ? r->elements
                   : 1;
    for (size_t i = 0; i <= n; i++) {
        int v = rlk_wd_check_batch_item(r, n, i);
        if (v < -1 || v > 1) {
            abort();
        }
    }
}

/* What the subscriber does with a reply: its kind, then the permits of its payload. */
static void check_push(const redisReply *r)
{
    static const int modes[3] = {RLK_MSG_LOCK, RLK_MSG_COUNT, RLK_MSG_ZERO_ALL};
    const char *channel = NULL;
    size_t len = 0;
    const redisReply *m = NULL;
    int kind = rlk_push_parse(r, &channel, &len, &m);
    if (kind != RLK_PUSH_MESSAGE && kind != RLK_PUSH_CONFIRM && kind != RLK_PUSH_PMESSAGE &&
        kind != RLK_PUSH_PCONFIRM) {
        return;
    }
    if (channel == NULL || m == NULL) {
        abort();
    }
    /* Reads every byte the subscriber would look up the channel by (ASan checks the bounds). */
    unsigned sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum += (unsigned char)channel[i];
    }
    if (sum > 255u * len) {
        abort();
    }
    for (int i = 0; i < 3; i++) {
        if (rlk_msg_permits(modes[i], m) < 0) {
            abort();
        }
    }
    (void)rlk_msg_wakes_all(m);
    uint64_t token = 0, wait = 0;
    size_t at = 0;
    if (m->type == REDIS_REPLY_STRING && rlk_grant_parse(m->str, m->len, &token, &wait, &at) &&
        at >= m->len) {
        abort(); /* a grant always names an owner after its token */
    }
}

static void check_inspect(const redisReply *r)
{
    rlock_lock_info *info = calloc(1, sizeof(*info));
    if (info == NULL || (info->name = malloc(5)) == NULL) {
        abort();
    }
    memcpy(info->name, "fuzz", 5);
    int rc = rlk_inspect_check_reply(r, info);
    if (rc != RLOCK_OK && rc != RLOCK_EPROTO && rc != RLOCK_EINVAL) {
        abort();
    }
    rlock_lock_info_free(info);
}

static void check_notify(const redisReply *r)
{
    long long v = 0;
    const char *refused = NULL;
    int rc = rlk_notify_reply_decode(r, &v, &refused);
    if ((rc != RLOCK_OK && rc != RLOCK_EPROTO) || (rc != RLOCK_OK && refused != NULL)) {
        abort();
    }
    if (rlk_notify_reply(client, r, &v, "fuzz") != rc) {
        abort();
    }
}

static void check_reply(redisReply *r)
{
    long long v = 0;

    (void)rlk_reply_is_noscript(r);
    check_redlock(r);
    check_watchdog(r);
    check_push(r);
    check_inspect(r);
    check_notify(r);
    int rc = rlk_reply_int(r, &v, "fuzz");
    if (rc != RLOCK_OK && rc != RLOCK_EPROTO) {
        abort();
    }
    for (int i = 0; i < 4; i++) {
        rlk_acq a;

        rlk_acq_init(&a, handles[i]);
        if (i < 2) {
            check_attempt(handles[i]->single->attempt_reply(&a, r));
        } else {
            check_attempt(rlk_rw_check_acquire_reply(&a, r));
        }
    }
}

/* Reads every complete reply in the input; with consume, the read-write release decoder takes
 * (and frees) each one, else check_reply() looks at it and it is freed here. */
static void read_all(const uint8_t *data, size_t size, int consume)
{
    redisReader *rd = redisReaderCreate();

    if (rd == NULL) {
        return;
    }
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        for (int n = 0; n < MAX_REPLIES; n++) {
            void *reply = NULL;

            if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL) {
                break;
            }
            if (consume) {
                int rc = rlk_rw_check_release_reply(client, reply);
                if (rc != 0 && rc != 1 && rc != RLK_NOT_HELD && rc != RLOCK_EPROTO) {
                    abort();
                }
            } else {
                check_reply(reply);
                freeReplyObject(reply);
            }
        }
    }
    redisReaderFree(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_huge_array(data, size)) {
        return 0;
    }
    setup();
    read_all(data, size, 0);
    read_all(data, size, 1);
    return 0;
}
