/*
 * The reply stream's watch (resp_guard.h). RESP items follow one another without nesting in
 * the byte stream: an array's header only announces how many items follow. So the guard needs
 * no stack, only the item being read: a header line (type byte, number, CRLF), a line item
 * (status, error, integer: up to CRLF), or a bulk payload to pass over. Static helpers are named
 * guard_*.
 */
#include "resp_guard.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "util.h"

/* The guard after a refusal: every later scan refuses too. */
#define GUARD_FAILED '!'

static int guard_refuse(rlk_resp_guard *g, const char *fmt, ...) RLK_PRINTF(2, 3);

static int guard_refuse(rlk_resp_guard *g, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    g->type = GUARD_FAILED;
    return rlk_err(RLOCK_EPROTO, "refused before parsing: %s", why);
}

/* A header's CRLF came: checks its number against the type's cap. */
static int guard_header_done(rlk_resp_guard *g)
{
    int bulk = g->type == '$';
    long long cap = bulk ? RLK_RESP_MAX_BULK : RLK_RESP_MAX_ELEMENTS;
    if (g->digits == 0 || (g->negative && g->value != 1)) {
        return guard_refuse(g, "a '%c' header is not a count", g->type);
    }
    if (!g->negative && g->value > cap) {
        return guard_refuse(g, "it announces %s of more than %lld %s",
                            bulk ? "a bulk string" : "an array", cap, bulk ? "bytes" : "elements");
    }
    g->skip = bulk && !g->negative ? g->value + 2 : 0;
    g->type = 0;
    return RLOCK_OK;
}

/* One byte of an array or bulk header after its type byte: [-]digits CRLF. */
static int guard_header_byte(rlk_resp_guard *g, char c)
{
    if (g->cr) {
        return c == '\n' ? guard_header_done(g)
                         : guard_refuse(g, "a '%c' header has a stray CR", g->type);
    }
    if (c == '\r') {
        g->cr = 1;
    } else if (c == '-' && g->digits == 0 && !g->negative) {
        g->negative = 1;
    } else if (c >= '0' && c <= '9' && g->digits < 32) {
        /* Saturates just above any cap, which keeps the arithmetic far from overflow. */
        g->value = g->value > RLK_RESP_MAX_BULK ? g->value : g->value * 10 + (c - '0');
        g->digits++;
    } else {
        return guard_refuse(g, "a '%c' header is not a number (byte 0x%02x)", g->type,
                            (unsigned char)c);
    }
    return RLOCK_OK;
}

/* Passes over a line item up to its CRLF; returns the bytes consumed. */
static size_t guard_line(rlk_resp_guard *g, const char *buf, size_t n)
{
    const char *nl = memchr(buf, '\n', n);
    if (nl == NULL) {
        g->cr = buf[n - 1] == '\r';
        return n;
    }
    size_t at = (size_t)(nl - buf);
    if (at == 0 ? g->cr : buf[at - 1] == '\r') {
        g->type = 0;
    }
    g->cr = 0;
    return at + 1;
}

int rlk_resp_guard_scan(rlk_resp_guard *g, const char *buf, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (g->type == GUARD_FAILED) {
            return rlk_err(RLOCK_EPROTO, "refused before parsing: the stream was refused before");
        }
        if (g->skip > 0) {
            size_t k = (uint64_t)g->skip < n - i ? (size_t)g->skip : n - i;
            g->skip -= (int64_t)k;
            i += k;
        } else if (g->type == 0) {
            memset(g, 0, sizeof(*g));
            g->type = buf[i++];
        } else if (g->type == '*' || g->type == '$') {
            int r = guard_header_byte(g, buf[i++]);
            if (r != RLOCK_OK) {
                return r;
            }
        } else {
            i += guard_line(g, buf + i, n - i);
        }
    }
    return RLOCK_OK;
}
