/*
 * What the RESP-reading fuzz targets share.
 */
#ifndef RLOCK_FUZZ_RESP_H
#define RLOCK_FUZZ_RESP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "resp_guard.h"

/* rlock's connections feed hiredis' reader only bytes that passed the reply stream's guard
 * (src/transport/resp_guard.c, called by conn.c): a header announcing more than 1M array elements
 * or a 512 MB bulk string, which hiredis 0.14 would allocate before any element arrives, is refused
 * there with RLOCK_EPROTO. The targets feed their input the same way: 1 when the guard refuses
 * it (the reader never sees it, as in the library). */
static inline int fuzz_huge_array(const uint8_t *data, size_t size)
{
    rlk_resp_guard g;

    memset(&g, 0, sizeof(g));
    return rlk_resp_guard_scan(&g, (const char *)data, size) != 0;
}

#endif
