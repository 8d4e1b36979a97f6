/*
 * The slot of a formatted script request (loop_route.h). The request is read as Redis reads
 * it: an array header, then bulk strings; nothing is trusted beyond len, since a wrong slot
 * would only cost a MOVED but a read past the buffer would be a fault.
 */
#include <string.h>
#include <strings.h>

#include "cluster_slot.h"
#include "loop_route.h"

/* A cursor over the request bytes. */
typedef struct route_rd {
    const char *p, *end;
} route_rd;

/* Reads "<mark><digits>\r\n": the number, or -1 when the bytes are not that. */
static long route_number(route_rd *rd, char mark)
{
    if (rd->p >= rd->end || *rd->p != mark) {
        return -1;
    }
    long n = 0;
    const char *q = rd->p + 1;
    for (; q < rd->end && *q >= '0' && *q <= '9'; q++) {
        if (n > (long)1 << 40) {
            return -1;
        }
        n = n * 10 + (*q - '0');
    }
    if (q == rd->p + 1 || rd->end - q < 2 || q[0] != '\r' || q[1] != '\n') {
        return -1;
    }
    rd->p = q + 2;
    return n;
}

/* Reads one bulk string into *s and *n: 0, or -1 when the bytes are not one. */
static int route_bulk(route_rd *rd, const char **s, size_t *n)
{
    long len = route_number(rd, '$');
    if (len < 0 || rd->end - rd->p < len + 2 || rd->p[len] != '\r' || rd->p[len + 1] != '\n') {
        return -1;
    }
    *s = rd->p;
    *n = (size_t)len;
    rd->p += len + 2;
    return 0;
}

/* 1 when the n bytes at s are a decimal count of at least one key. */
static int route_has_keys(const char *s, size_t n)
{
    int nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        nonzero |= s[i] != '0';
    }
    return nonzero;
}

int rlk_loop_request_slot(const char *cmd, size_t len)
{
    route_rd rd = {cmd, cmd + len};
    const char *s[4];
    size_t n[4];
    if (cmd == NULL || route_number(&rd, '*') < 4) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        if (route_bulk(&rd, &s[i], &n[i]) != 0) {
            return -1;
        }
    }
    int script = (n[0] == 4 && strncasecmp(s[0], "EVAL", 4) == 0) ||
                 (n[0] == 7 && strncasecmp(s[0], "EVALSHA", 7) == 0);
    if (!script || !route_has_keys(s[2], n[2])) {
        return -1;
    }
    return rlk_cluster_key_slot(s[3], n[3]);
}

int rlk_loop_request_set_sha(char *cmd, size_t len, const char *sha)
{
    route_rd rd = {cmd, cmd + len};
    const char *s[2];
    size_t n[2];
    if (cmd == NULL || route_number(&rd, '*') < 2 || route_bulk(&rd, &s[0], &n[0]) != 0 ||
        route_bulk(&rd, &s[1], &n[1]) != 0) {
        return -1;
    }
    if (n[0] != 7 || strncasecmp(s[0], "EVALSHA", 7) != 0 || n[1] != 40) {
        return -1;
    }
    memcpy(cmd + (s[1] - cmd), sha, 40); /* s[1] points into cmd: written through cmd */
    return 0;
}
