/*
 * A request in RESP; see resp_format.h.
 */
#include "resp_format.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The decimal digits of v. */
static size_t resp_digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Writes "<type><v>\r\n" at p; returns the bytes written. */
static size_t resp_header(char *p, char type, size_t v)
{
    p[0] = type;
    size_t n = 1 + rlk_fmt_u64(p + 1, (uint64_t)v);
    p[n] = '\r';
    p[n + 1] = '\n';
    return n + 2;
}

/* The length of argument i: lens[i], or strlen() when the caller gave no lengths. */
static size_t resp_len(const char *const *argv, const size_t *lens, int i)
{
    return lens != NULL ? lens[i] : strlen(argv[i]);
}

long long rlk_resp_format(int argc, const char *const *argv, const size_t *lens, char **out)
{
    size_t total = 1 + resp_digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++) {
        size_t len = resp_len(argv, lens, i);
        total += 1 + resp_digits(len) + 2 + len + 2;
    }
    /* One spare byte: rlk_fmt_u64() ends what it writes with a NUL. */
    char *buf = malloc(total + 1);
    *out = buf;
    if (buf == NULL) {
        return -1;
    }
    size_t pos = resp_header(buf, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t len = resp_len(argv, lens, i);
        pos += resp_header(buf + pos, '$', len);
        memcpy(buf + pos, argv[i], len);
        pos += len;
        buf[pos++] = '\r';
        buf[pos++] = '\n';
    }
    return (long long)pos;
}
