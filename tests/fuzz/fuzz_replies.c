/*
 * libFuzzer target: the checks every script caller applies to Redis' replies.
 *
 * The input is arbitrary bytes read as RESP by hiredis' own reader (redisReader, the code that
 * parses replies off a connection), so the replies are exactly what a hostile or broken server
 * could make hiredis hand to rlock. Each reply goes through the decoders the callers use:
 * attempt replies of the reentrant, fair, read and write locks (through rlk_single_ops, as the
 * armed-attempt path calls them), the read-write release decoder, rlk_reply_int (releases, force
 * releases, queries) and the NOSCRIPT test. The handles sit on a client that is never started:
 * decoding needs no connection. A decoder must return a documented code, never crash or leak.
 */
#include <hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "lock.h"
#include "pool.h"
#include "reply_checks.h"
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

static void check_reply(redisReply *r)
{
    long long v = 0;

    (void)rlk_reply_is_noscript(r);
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

/* hiredis 0.14 allocates an array's element table as soon as it reads "*<count>", before any
 * element arrives (1.x caps the count), so "*254775808" makes it calloc 2 GB: a property of
 * hiredis, not of the checks fuzzed here. Inputs announcing more than 1024 elements are skipped. */
static int huge_array(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        long long count = 0;
        size_t j = i + 1;

        if (data[i] != '*') {
            continue;
        }
        while (j < size && data[j] >= '0' && data[j] <= '9' && count <= 1024) {
            count = count * 10 + (data[j++] - '0');
        }
        if (count > 1024) {
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (huge_array(data, size)) {
        return 0;
    }
    setup();
    read_all(data, size, 0);
    read_all(data, size, 1);
    return 0;
}
