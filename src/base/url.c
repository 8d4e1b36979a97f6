/*
 * The connection URL parser; see url.h for the accepted grammar.
 *
 * The parser works on spans of the caller's string and copies only the final fields, so every
 * failure path has one cleanup: rlk_url_free() on the output. It is strict on purpose: a typo in a
 * URL should fail at rlock_client_new() with a reason, not connect somewhere unexpected.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* inet_pton */
#endif

#include "url.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "rlock.h"

/* Longest DNS name. */
#define RLK_URL_HOST_MAX 253
/* The longest socket path that fits in sun_path with its terminating NUL. */
#define RLK_URL_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* A piece of the input; not NUL-terminated. */
typedef struct rlk_span {
    const char *p;
    size_t n;
} rlk_span;

/* Where the reason for a failure goes. base is the start of the URL, so a message can point at a
 * fragment by its offset: no message quotes more than one character of the input, because in a
 * malformed URL any fragment may be (part of) the password - "redis://user:Pw0rd" without its '@'
 * reads as host "user" and port "Pw0rd". */
typedef struct rlk_url_err {
    char *buf;
    size_t len;
    const char *base;
    size_t shift; /* added to offsets: base is a copy of a part of the URL that starts here */
} rlk_url_err;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static int
url_fail(rlk_url_err *e, const char *fmt, ...)
{
    if (e->buf != NULL && e->len > 0) {
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(e->buf, e->len, fmt, ap);
        va_end(ap);
    }
    return RLOCK_EINVAL;
}

static int url_oom(rlk_url_err *e)
{
    if (e->buf != NULL && e->len > 0) {
        (void)snprintf(e->buf, e->len, "out of memory while parsing the URL");
    }
    return RLOCK_ENOMEM;
}

/* The offset of a fragment in the URL, named in messages instead of the fragment itself. */
static size_t url_at(const rlk_url_err *e, const char *p)
{
    return e->base != NULL && p >= e->base ? (size_t)(p - e->base) + e->shift : 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int hex_value(char c)
{
    if (is_digit(c)) {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static int span_ieq(rlk_span s, const char *word)
{
    size_t n = strlen(word);

    if (s.n != n) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s.p[i];

        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != word[i]) {
            return 0;
        }
    }
    return 1;
}

static int span_dup(rlk_span s, char **dst, rlk_url_err *e)
{
    char *p = malloc(s.n + 1);

    if (p == NULL) {
        return url_oom(e);
    }
    memcpy(p, s.p, s.n);
    p[s.n] = '\0';
    *dst = p;
    return 0;
}

/* Percent-decodes s into a new string. `what` names the field for the message; the field's
 * content is never quoted because it may be a password. */
static int url_decode(rlk_span s, char **dst, const char *what, rlk_url_err *e)
{
    char *p = malloc(s.n + 1);
    size_t j = 0;

    if (p == NULL) {
        return url_oom(e);
    }
    for (size_t i = 0; i < s.n; i++) {
        int hi, lo;

        if (s.p[i] != '%') {
            p[j++] = s.p[i];
            continue;
        }
        hi = i + 2 < s.n ? hex_value(s.p[i + 1]) : -1;
        lo = i + 2 < s.n ? hex_value(s.p[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            free(p);
            return url_fail(e,
                            "invalid percent-escape in the %s: '%%' must be followed by "
                            "two hex digits",
                            what);
        }
        if (hi == 0 && lo == 0) {
            free(p);
            return url_fail(e, "the %s contains %%00 (a NUL byte)", what);
        }
        p[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    p[j] = '\0';
    *dst = p;
    return 0;
}

/* Parses a decimal number in [min, max]. `what` names the field ("port", "db"). */
static int url_number(rlk_span s, long min, long max, const char *what, int *out, rlk_url_err *e)
{
    long v = 0;
    size_t i = 0;

    if (s.n == 0) {
        return url_fail(e, "empty %s", what);
    }
    if (s.p[0] == '-' && s.n > 1 && is_digit(s.p[1])) {
        return url_fail(e, "%s must not be negative (at offset %zu)", what, url_at(e, s.p));
    }
    if (!is_digit(s.p[0])) {
        return url_fail(e, "%s is not a decimal number (at offset %zu)", what, url_at(e, s.p));
    }
    while (i < s.n && is_digit(s.p[i])) {
        v = v * 10 + (s.p[i] - '0');
        if (v > max) {
            return url_fail(e, "%s is larger than %ld", what, max);
        }
        i++;
    }
    if (i < s.n) {
        return url_fail(e, "unexpected characters after the %s (at offset %zu)", what,
                        url_at(e, s.p + i));
    }
    if (v < min) {
        return url_fail(e, "%s must be between %ld and %ld", what, min, max);
    }
    *out = (int)v;
    return 0;
}

/* "[user]:password" before the '@'. */
static int url_userinfo(rlk_span ui, rlk_url *out, rlk_url_err *e)
{
    const char *colon = memchr(ui.p, ':', ui.n);
    rlk_span user, password;
    int rc;

    if (colon == NULL) {
        return url_fail(e, "the part before '@' needs a ':' before the password "
                           "(user:password@ or :password@)");
    }
    user.p = ui.p;
    user.n = (size_t)(colon - ui.p);
    password.p = colon + 1;
    password.n = ui.n - user.n - 1;
    if (password.n == 0) {
        return url_fail(e, "empty password before '@'");
    }
    if (user.n > 0) {
        rc = url_decode(user, &out->user, "user", e);
        if (rc != 0) {
            return rc;
        }
    }
    return url_decode(password, &out->password, "password", e);
}

static int url_ipv6(rlk_span h, rlk_url *out, rlk_url_err *e)
{
    char buf[INET6_ADDRSTRLEN];
    struct in6_addr addr;

    if (h.n == 0) {
        return url_fail(e, "empty IPv6 address in '[]'");
    }
    if (h.n >= sizeof(buf)) {
        return url_fail(e, "invalid IPv6 address: too long");
    }
    memcpy(buf, h.p, h.n);
    buf[h.n] = '\0';
    if (inet_pton(AF_INET6, buf, &addr) != 1) {
        return url_fail(e, "invalid IPv6 address (at offset %zu)", url_at(e, h.p));
    }
    return span_dup(h, &out->host, e);
}

static int url_hostname(rlk_span h, rlk_url *out, rlk_url_err *e)
{
    if (h.n == 0) {
        return url_fail(e, "missing host");
    }
    if (h.n > RLK_URL_HOST_MAX) {
        return url_fail(e, "host name is longer than %d characters", RLK_URL_HOST_MAX);
    }
    for (size_t i = 0; i < h.n; i++) {
        char c = h.p[i];

        if (is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_') {
            continue;
        }
        if (c == '[' || c == ']') {
            return url_fail(e,
                            "misplaced '%c' in the host: write an IPv6 address as "
                            "[addr] or [addr]:port",
                            c);
        }
        return url_fail(e, "invalid character '%c' in the host (at offset %zu)", c,
                        url_at(e, h.p + i));
    }
    return span_dup(h, &out->host, e);
}

/* "host", "host:port", "[v6]" or "[v6]:port"; default_port when there is no port. */
static int url_hostport(rlk_span hp, int default_port, rlk_url *out, rlk_url_err *e)
{
    rlk_span port = {NULL, 0};
    int has_port = 0;
    int rc;

    if (hp.n == 0) {
        return url_fail(e, "missing host");
    }
    if (hp.p[0] == '[') {
        const char *close = memchr(hp.p, ']', hp.n);
        rlk_span host;
        size_t after;

        if (close == NULL) {
            return url_fail(e, "'[' without a closing ']' in the host");
        }
        host.p = hp.p + 1;
        host.n = (size_t)(close - host.p);
        after = hp.n - (size_t)(close + 1 - hp.p);
        if (after > 0 && close[1] != ':') {
            return url_fail(e,
                            "unexpected '%c' after ']': expected ':port' or the end of the "
                            "host",
                            close[1]);
        }
        has_port = after > 0;
        port.p = close + 2;
        port.n = has_port ? after - 1 : 0;
        rc = url_ipv6(host, out, e);
    } else {
        const char *colon = memchr(hp.p, ':', hp.n);
        rlk_span host = {hp.p, colon != NULL ? (size_t)(colon - hp.p) : hp.n};

        if (colon != NULL) {
            has_port = 1;
            port.p = colon + 1;
            port.n = hp.n - host.n - 1;
            if (memchr(port.p, ':', port.n) != NULL) {
                return url_fail(e, "an IPv6 address must be written in brackets, as in "
                                   "redis://[::1]:6379");
            }
        }
        rc = url_hostname(host, out, e);
    }
    if (rc != 0) {
        return rc;
    }
    out->port = default_port;
    if (has_port && port.n == 0) {
        return url_fail(e, "empty port after ':'");
    }
    return has_port ? url_number(port, 1, 65535, "port", &out->port, e) : 0;
}

/* The part after '?': '&'-separated parameters, of which only db is known. */
static int url_query(rlk_span q, rlk_url *out, int have_db, rlk_url_err *e)
{
    const char *p = q.p;
    const char *end = q.p + q.n;

    if (q.n == 0) {
        return url_fail(e, "empty query after '?'");
    }
    for (;;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        rlk_span param = {p, (size_t)((amp != NULL ? amp : end) - p)};
        const char *eq = memchr(param.p, '=', param.n);
        rlk_span key = {param.p, eq != NULL ? (size_t)(eq - param.p) : param.n};
        int rc;

        if (param.n == 0) {
            return url_fail(e, "empty query parameter");
        }
        if (!span_ieq(key, "db")) {
            return url_fail(e, "unknown query parameter at offset %zu (only db is supported)",
                            url_at(e, key.p));
        }
        if (eq == NULL) {
            return url_fail(e, "query parameter db has no value");
        }
        if (have_db) {
            return url_fail(e, "db is given twice");
        }
        rc = url_number((rlk_span){eq + 1, param.n - key.n - 1}, 0, INT_MAX, "db", &out->db, e);
        if (rc != 0) {
            return rc;
        }
        have_db = 1;
        if (amp == NULL) {
            return 0;
        }
        p = amp + 1;
    }
}

/* The comma-separated host list of a Sentinel or cluster URL into out->hosts. */
static int url_host_list(rlk_span list, int default_port, rlk_url *out, rlk_url_err *e)
{
    size_t n = 1;
    for (size_t i = 0; i < list.n; i++) {
        n += list.p[i] == ',';
    }
    if (n > RLK_URL_HOSTS_MAX) {
        return url_fail(e, "more than %d hosts", RLK_URL_HOSTS_MAX);
    }
    out->hosts = calloc(n, sizeof(*out->hosts));
    if (out->hosts == NULL) {
        return url_oom(e);
    }
    const char *p = list.p, *end = list.p + list.n;
    for (size_t i = 0; i < n; i++) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        rlk_span hp = {p, (size_t)((comma != NULL ? comma : end) - p)};
        rlk_url one = {0};
        int rc = url_hostport(hp, default_port, &one, e);
        out->hosts[i].host = one.host;
        out->hosts[i].port = one.port;
        out->nhosts = i + 1;
        if (rc != 0) {
            return rc;
        }
        p = comma != NULL ? comma + 1 : end;
    }
    return 0;
}

/* The host part: one host, or the list of a Sentinel or cluster URL. */
static int url_hosts(rlk_span hp, rlk_url *out, rlk_url_err *e)
{
    switch (out->kind) {
    case RLK_URL_SENTINEL:
        return url_host_list(hp, RLK_URL_SENTINEL_PORT, out, e);
    case RLK_URL_CLUSTER:
        return url_host_list(hp, RLK_URL_DEFAULT_PORT, out, e);
    default:
        return url_hostport(hp, RLK_URL_DEFAULT_PORT, out, e);
    }
}

static int url_parse_redis(const char *rest, rlk_url *out, rlk_url_err *e)
{
    size_t alen = strcspn(rest, "/?");
    const char *at = memchr(rest, '@', alen);
    const char *tail = rest + alen;
    rlk_span hostport = {rest, alen};
    int have_db = 0;
    int rc;

    if (strchr(tail, '@') != NULL) {
        return url_fail(e, "'@' after the host: percent-encode '/', '?' and '@' in the user "
                           "and password (%%2F, %%3F, %%40)");
    }
    if (at != NULL) {
        hostport.p = at + 1;
        hostport.n = alen - (size_t)(hostport.p - rest);
        if (memchr(hostport.p, '@', hostport.n) != NULL) {
            return url_fail(e, "more than one '@': percent-encode '@' in the user and "
                               "password as %%40");
        }
        if (hostport.n == 0) {
            return url_fail(e, "missing host after '@'");
        }
        rc = url_userinfo((rlk_span){rest, (size_t)(at - rest)}, out, e);
        if (rc != 0) {
            return rc;
        }
    }
    rc = url_hosts(hostport, out, e);
    if (rc != 0) {
        return rc;
    }
    if (out->kind == RLK_URL_CLUSTER && *tail != '\0' && strcmp(tail, "/") != 0) {
        return url_fail(e, "a cluster URL takes no db (a cluster has only db 0)");
    }
    if (*tail == '/') {
        size_t plen = strcspn(tail + 1, "?");

        /* "redis://host/" is db 0, as in redis-cli and most clients. */
        if (plen > 0) {
            rc = url_number((rlk_span){tail + 1, plen}, 0, INT_MAX, "db", &out->db, e);
            if (rc != 0) {
                return rc;
            }
            have_db = 1;
        }
        tail += 1 + plen;
    }
    if (*tail == '?') {
        return url_query((rlk_span){tail + 1, strlen(tail + 1)}, out, have_db, e);
    }
    return 0;
}

/* Checks a decoded socket path. */
static int url_check_path(const char *path, rlk_url_err *e)
{
    size_t n = strlen(path);

    if (n <= 1) {
        return url_fail(e, "unix:// URL has no socket path");
    }
    if (path[n - 1] == '/') {
        return url_fail(e, "the unix socket path ends in '/'");
    }
    if (n > RLK_URL_PATH_MAX) {
        return url_fail(e, "the unix socket path is longer than %zu bytes",
                        (size_t)RLK_URL_PATH_MAX);
    }
    return 0;
}

static int url_parse_unix(const char *rest, rlk_url *out, rlk_url_err *e)
{
    const char *path = rest;
    size_t plen;
    int rc;

    if (*rest == '\0') {
        return url_fail(e, "unix:// URL has no socket path");
    }
    if (*rest != '/') {
        /* Either userinfo before the path, or a host or relative path, which are errors. */
        size_t alen = strcspn(rest, "/?");
        const char *at = memchr(rest, '@', alen);

        if (at == NULL) {
            return url_fail(e, "the unix socket path must be absolute, as in "
                               "unix:///run/redis.sock (no host part)");
        }
        if (memchr(at + 1, '@', alen - (size_t)(at + 1 - rest)) != NULL) {
            return url_fail(e, "more than one '@': percent-encode '@' in the user and "
                               "password as %%40");
        }
        if (rest[alen] != '/') {
            return url_fail(e, "missing or relative unix socket path after '@'");
        }
        if (at + 1 != rest + alen) {
            return url_fail(e, "unix:// URLs take no host: write unix://:password@/path");
        }
        rc = url_userinfo((rlk_span){rest, (size_t)(at - rest)}, out, e);
        if (rc != 0) {
            return rc;
        }
        path = rest + alen;
    }
    plen = strcspn(path, "?");
    rc = url_decode((rlk_span){path, plen}, &out->path, "socket path", e);
    if (rc == 0) {
        rc = url_check_path(out->path, e);
    }
    if (rc == 0 && path[plen] == '?') {
        rc = url_query((rlk_span){path + plen + 1, strlen(path + plen + 1)}, out, 0, e);
    }
    out->is_unix = 1;
    out->port = 0;
    return rc;
}

/* Rejects what no part of the grammar allows, before any splitting. */
static int url_scan(const char *s, rlk_url_err *e)
{
    size_t i;

    if (s == NULL) {
        return url_fail(e, "URL is NULL");
    }
    for (i = 0; s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];

        if (i >= RLK_URL_MAX) {
            return url_fail(e, "URL is longer than %d bytes", RLK_URL_MAX);
        }
        if (c <= 0x20 || c == 0x7f) {
            return url_fail(e, "space or control character at offset %zu", i);
        }
        if (c >= 0x80) {
            return url_fail(e, "non-ASCII byte at offset %zu (percent-encode it)", i);
        }
    }
    if (i == 0) {
        return url_fail(e, "URL is empty");
    }
    return 0;
}

/* A '#' is allowed once, before the master name of a Sentinel URL, and nowhere else. */
static int url_fragment(const char *s, const rlk_url *out, rlk_url_err *e)
{
    const char *hash = strchr(s, '#');
    if (hash == NULL || (out->kind == RLK_URL_SENTINEL && strchr(hash + 1, '#') == NULL)) {
        return 0;
    }
    if (out->kind == RLK_URL_SENTINEL) {
        hash = strchr(hash + 1, '#');
    }
    return url_fail(e,
                    "'#' at offset %zu: fragments are not allowed (percent-encode it as "
                    "%%23)",
                    (size_t)(hash - s));
}

/* The Sentinel and cluster schemes (kind and tls); 0 if the scheme is none of them. */
static int url_multi_scheme(rlk_span scheme, rlk_url *out)
{
    static const struct {
        const char *name;
        rlk_url_kind kind;
        int tls;
    } schemes[] = {
        {"redis-sentinel", RLK_URL_SENTINEL, 0},
        {"rediss-sentinel", RLK_URL_SENTINEL, 1},
        {"redis-cluster", RLK_URL_CLUSTER, 0},
        {"rediss-cluster", RLK_URL_CLUSTER, 1},
    };
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        if (span_ieq(scheme, schemes[i].name)) {
            out->kind = schemes[i].kind;
            out->tls = schemes[i].tls;
            return 1;
        }
    }
    return 0;
}

/* Splits off "scheme://" and tells which scheme it is. */
static int url_scheme(const char *s, const char **rest, int *is_unix, rlk_url *out, rlk_url_err *e)
{
    rlk_span scheme = {s, 0};

    *rest = s; /* Defined on every path, even though callers only read it on success. */
    while (is_alpha(s[scheme.n]) || is_digit(s[scheme.n]) || s[scheme.n] == '+' ||
           s[scheme.n] == '-' || s[scheme.n] == '.') {
        scheme.n++;
    }
    if (scheme.n == 0 || strncmp(s + scheme.n, "://", 3) != 0) {
        return url_fail(e, "missing scheme: expected redis://host[:port][/db] or "
                           "unix:///path");
    }
    *rest = s + scheme.n + 3;
    if (span_ieq(scheme, "redis")) {
        *is_unix = 0;
        return 0;
    }
    if (span_ieq(scheme, "unix")) {
        *is_unix = 1;
        return 0;
    }
    if (url_multi_scheme(scheme, out)) {
        *is_unix = 0;
        return 0;
    }
    if (span_ieq(scheme, "rediss")) {
        *is_unix = 0;
        out->tls = 1;
        return 0;
    }
    return url_fail(e, "unsupported scheme: expected redis://, rediss://, unix://, "
                       "redis-sentinel:// or redis-cluster://");
}

/* Parses what follows "redis-sentinel://": the part before '#' as a redis:// URL with a host
 * list, then the master name. */
static int url_parse_sentinel(const char *rest, rlk_url *out, rlk_url_err *e)
{
    const char *hash = strchr(rest, '#');
    if (hash == NULL || hash[1] == '\0') {
        return url_fail(e, "a Sentinel URL needs the master's name after '#', as in "
                           "redis-sentinel://host:26379#mymaster");
    }
    char *body = NULL;
    int rc = span_dup((rlk_span){rest, (size_t)(hash - rest)}, &body, e);
    if (rc != 0) {
        return rc;
    }
    /* Offsets in messages stay those of the caller's URL. */
    rlk_url_err be = {e->buf, e->len, body, (size_t)(rest - e->base) + e->shift};
    rc = url_parse_redis(body, out, &be);
    free(body);
    if (rc == 0) {
        rc =
            url_decode((rlk_span){hash + 1, strlen(hash + 1)}, &out->master_name, "master name", e);
    }
    return rc;
}

int rlk_url_parse(const char *s, rlk_url *out, char *err, size_t errlen)
{
    rlk_url_err e = {err, errlen, s, 0};
    const char *rest = NULL;
    int is_unix = 0;
    int rc;

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out == NULL) {
        return url_fail(&e, "no output struct");
    }
    memset(out, 0, sizeof(*out));
    rc = url_scan(s, &e);
    if (rc == 0) {
        rc = url_scheme(s, &rest, &is_unix, out, &e);
    }
    if (rc == 0) {
        rc = url_fragment(s, out, &e);
    }
    if (rc == 0 && out->kind == RLK_URL_SENTINEL) {
        rc = url_parse_sentinel(rest, out, &e);
    } else if (rc == 0) {
        rc = is_unix ? url_parse_unix(rest, out, &e) : url_parse_redis(rest, out, &e);
    }
    if (rc != 0) {
        rlk_url_free(out);
    }
    return rc;
}

void rlk_url_free(rlk_url *u)
{
    if (u == NULL) {
        return;
    }
    free(u->host);
    free(u->path);
    free(u->user);
    free(u->password);
    for (size_t i = 0; i < u->nhosts; i++) {
        free(u->hosts[i].host);
    }
    free(u->hosts);
    free(u->master_name);
    memset(u, 0, sizeof(*u));
}
