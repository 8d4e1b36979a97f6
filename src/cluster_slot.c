/*
 * The hash slot of a key in Redis Cluster; see cluster_slot.h.
 */
#include "cluster_slot.h"

#include <string.h>

uint16_t rlk_crc16(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++) {
            /* Shift out the top bit and fold the polynomial in when it was set. */
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

int rlk_cluster_key_slot(const void *key, size_t len)
{
    const char *k = key;
    const char *open = len > 0 ? memchr(k, '{', len) : NULL;

    if (open != NULL) {
        size_t start = (size_t)(open - k) + 1;
        const char *close = memchr(k + start, '}', len - start);
        /* An empty tag "{}" does not count: Redis then hashes the whole key. */
        if (close != NULL && close > k + start) {
            return rlk_crc16(k + start, (size_t)(close - (k + start))) & (RLK_CLUSTER_SLOTS - 1);
        }
    }
    return rlk_crc16(k, len) & (RLK_CLUSTER_SLOTS - 1);
}
