/*
 * libFuzzer target: what rlock decodes from a Redis Cluster (src/topology/cluster_map.c).
 *
 * The input is split at its first NUL byte: the part before is an error text for the MOVED/ASK
 * parser, the rest is RESP fed through hiredis' reader, whose reply goes to both topology
 * decoders. Besides the sanitizers' checks, the contracts are asserted: a decoder returns
 * RLOCK_OK, RLOCK_EPROTO or RLOCK_ENOMEM; a failure leaves the map empty; a success maps every
 * slot to -1 or a valid node with a port in 1..65535; a redirection names a slot in range and a
 * port in 1..65535.
 */
#include <hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_map.h"
#include "fuzz_resp.h"
#include "rlock.h"

static void check_map(int rc, rlk_cluster_map *m)
{
    if (rc != RLOCK_OK) {
        if (rc != RLOCK_EPROTO && rc != RLOCK_ENOMEM) {
            abort();
        }
        if (m->nodes != NULL || m->n_nodes != 0) {
            abort();
        }
        return;
    }
    for (int s = 0; s < RLK_CLUSTER_SLOTS; s++) {
        if (m->owner[s] < -1 || m->owner[s] >= m->n_nodes) {
            abort();
        }
    }
    for (int i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].host == NULL || m->nodes[i].port < 1 || m->nodes[i].port > 65535) {
            abort();
        }
    }
    rlk_cluster_map_free(m);
}

static void check_redirect(const uint8_t *data, size_t size)
{
    rlk_redirect rd;
    rlk_redirect_kind k = rlk_cluster_parse_redirect((const char *)data, size, &rd);
    if (k != RLK_REDIRECT_NONE &&
        (rd.slot < 0 || rd.slot >= RLK_CLUSTER_SLOTS || rd.port < 1 || rd.port > 65535 ||
         memchr(rd.host, '\0', sizeof(rd.host)) == NULL)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    size_t text_len = nul != NULL ? (size_t)(nul - data) : size;
    check_redirect(data, text_len);
    if (nul == NULL || fuzz_huge_array(nul + 1, size - text_len - 1)) {
        return 0;
    }

    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    if (rd == NULL) {
        return 0;
    }
    if (redisReaderFeed(rd, (const char *)nul + 1, size - text_len - 1) == REDIS_OK &&
        redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
        rlk_cluster_map m;
        check_map(rlk_cluster_map_from_shards(reply, "seed", &m), &m);
        check_map(rlk_cluster_map_from_slots(reply, "seed", &m), &m);
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    return 0;
}
