/*
 * What the RESP-reading fuzz targets share.
 */
#ifndef RLOCK_FUZZ_RESP_H
#define RLOCK_FUZZ_RESP_H

#include <stddef.h>
#include <stdint.h>

/* hiredis 0.14 allocates an array's element table as soon as it reads "*<count>", before any
 * element arrives (1.x caps the count), so "*254775808" makes it calloc 2 GB: a property of
 * hiredis, not of the code fuzzed here. Inputs announcing more than 1024 elements are skipped. */
static inline int fuzz_huge_array(const uint8_t *data, size_t size)
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

#endif
