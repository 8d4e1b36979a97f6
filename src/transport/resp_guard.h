/*
 * A watch on the bytes of a reply stream before hiredis' reader sees them. hiredis 0.14
 * allocates an array's element table as soon as it reads the "*<count>" header, before any
 * element has arrived, so ten bytes from a hostile or broken server ("*444444443\r\n") make it
 * allocate gigabytes. The guard follows the stream's headers and refuses a count or a length
 * beyond the caps below, or a header Redis never sends, before the bytes are fed.
 */
#ifndef RLK_RESP_GUARD_H
#define RLK_RESP_GUARD_H

#include <stddef.h>
#include <stdint.h>

/* The most elements an array reply may announce (an 8 MiB element table in hiredis). */
#define RLK_RESP_MAX_ELEMENTS (1024LL * 1024)
/* The longest bulk string a reply may announce: Redis' own proto-max-bulk-len default. */
#define RLK_RESP_MAX_BULK (512LL * 1024 * 1024)

/* Where the guard is in the stream. All zero is the start of a stream. */
typedef struct rlk_resp_guard {
    int64_t skip;           /* bytes of a bulk string's payload and its CRLF still to pass */
    int64_t value;          /* the number of the header being read, saturated above its cap */
    char type;              /* the type byte of the item being read, 0 between items */
    unsigned char digits;   /* digits of value read so far */
    unsigned char negative; /* a '-' came first */
    unsigned char cr;       /* the byte before was '\r' */
} rlk_resp_guard;

/* Follows the next n bytes of the stream. RLOCK_OK, or RLOCK_EPROTO with the reason in the last
 * error (rlk_err) when a header announces more than a cap or is not a number Redis would send;
 * the stream must then be dropped (the guard stays failed). Pure: no I/O, no allocation. */
int rlk_resp_guard_scan(rlk_resp_guard *g, const char *buf, size_t n);

#endif
