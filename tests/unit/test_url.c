/*
 * Unit tests for src/base/url.c: every accepted form parses to exact fields, and every malformed
 * URL is rejected with RLOCK_EINVAL, a specific reason and a zeroed output. No server needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rlock.h"
#include "url.h"

struct valid_case {
    const char *url;
    const char *host;
    const char *path;
    const char *user;
    const char *password;
    int is_unix;
    int port;
    int db;
};

/* Keeps the table below in the field order of rlk_url, which reads more naturally. */
#define V(url, is_unix, host, port, path, user, password, db)                                      \
    {                                                                                              \
        url, host, path, user, password, is_unix, port, db                                         \
    }

static const struct valid_case valid_cases[] = {
    V("redis://localhost", 0, "localhost", 6379, NULL, NULL, NULL, 0),
    V("redis://host", 0, "host", 6379, NULL, NULL, NULL, 0),
    V("redis://host:6380/2", 0, "host", 6380, NULL, NULL, NULL, 2),
    V("redis://127.0.0.1:6380/2", 0, "127.0.0.1", 6380, NULL, NULL, NULL, 2),
    V("redis://host/", 0, "host", 6379, NULL, NULL, NULL, 0),
    V("redis://host:7000/", 0, "host", 7000, NULL, NULL, NULL, 0),
    V("redis://host:6379/0", 0, "host", 6379, NULL, NULL, NULL, 0),
    V("redis://h:00080", 0, "h", 80, NULL, NULL, NULL, 0),
    V("redis://:pw@host", 0, "host", 6379, NULL, NULL, "pw", 0),
    V("redis://user:pw@host", 0, "host", 6379, NULL, "user", "pw", 0),
    V("redis://user:pw@host:6390/5", 0, "host", 6390, NULL, "user", "pw", 5),
    V("redis://user:pa:ss@host", 0, "host", 6379, NULL, "user", "pa:ss", 0),
    V("redis://us%40er:p%40ss%3Aw%2Fd%3f%25@host:1/15", 0, "host", 1, NULL, "us@er", "p@ss:w/d?%",
      15),
    V("redis://[::1]", 0, "::1", 6379, NULL, NULL, NULL, 0),
    V("redis://[::1]:6380/3", 0, "::1", 6380, NULL, NULL, NULL, 3),
    V("redis://:pw@[2001:db8::1]:7000/1", 0, "2001:db8::1", 7000, NULL, NULL, "pw", 1),
    V("redis://[::ffff:10.0.0.1]/", 0, "::ffff:10.0.0.1", 6379, NULL, NULL, NULL, 0),
    V("REDIS://Host.Example.COM:65535/2147483647", 0, "Host.Example.COM", 65535, NULL, NULL, NULL,
      2147483647),
    V("redis://my_host-1.local", 0, "my_host-1.local", 6379, NULL, NULL, NULL, 0),
    V("redis://host?db=4", 0, "host", 6379, NULL, NULL, NULL, 4),
    V("redis://host:6381/?db=9", 0, "host", 6381, NULL, NULL, NULL, 9),
    V("unix:///tmp/redis.sock", 1, NULL, 0, "/tmp/redis.sock", NULL, NULL, 0),
    V("unix:///var/run/redis/redis.sock?db=3", 1, NULL, 0, "/var/run/redis/redis.sock", NULL, NULL,
      3),
    V("unix://:secret@/tmp/r.sock?db=2", 1, NULL, 0, "/tmp/r.sock", NULL, "secret", 2),
    V("unix://user:secret@/tmp/r.sock", 1, NULL, 0, "/tmp/r.sock", "user", "secret", 0),
    V("UNIX:///tmp/with%20space.sock", 1, NULL, 0, "/tmp/with space.sock", NULL, NULL, 0),
    V("unix:///tmp/a@b.sock", 1, NULL, 0, "/tmp/a@b.sock", NULL, NULL, 0),
};

static void assert_str_or_null(const char *got, const char *want)
{
    if (want == NULL) {
        assert_null(got);
    } else {
        assert_non_null(got);
        assert_string_equal(got, want);
    }
}

static void assert_zeroed(const rlk_url *u)
{
    assert_int_equal(u->is_unix, 0);
    assert_null(u->host);
    assert_int_equal(u->port, 0);
    assert_null(u->path);
    assert_null(u->user);
    assert_null(u->password);
    assert_int_equal(u->db, 0);
    assert_int_equal(u->tls, 0);
    assert_int_equal(u->kind, RLK_URL_STANDALONE);
    assert_null(u->hosts);
    assert_int_equal((int)u->nhosts, 0);
    assert_null(u->master_name);
}

static void test_valid_forms(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(valid_cases) / sizeof(valid_cases[0]); i++) {
        const struct valid_case *c = &valid_cases[i];
        rlk_url u;
        char err[256] = "untouched";
        int rc;

        memset(&u, 0xa5, sizeof(u));
        rc = rlk_url_parse(c->url, &u, err, sizeof(err));
        if (rc != 0) {
            fail_msg("'%s' was rejected (%d): %s", c->url, rc, err);
        }
        assert_string_equal(err, "");
        assert_int_equal(u.is_unix, c->is_unix);
        assert_str_or_null(u.host, c->host);
        assert_int_equal(u.port, c->port);
        assert_str_or_null(u.path, c->path);
        assert_str_or_null(u.user, c->user);
        assert_str_or_null(u.password, c->password);
        assert_int_equal(u.db, c->db);
        rlk_url_free(&u);
        assert_zeroed(&u);
    }
}

struct invalid_case {
    const char *url;
    const char *reason; /* a substring the message must contain */
};

static const struct invalid_case invalid_cases[] = {
    {"", "empty"},
    {"rediss://", "missing host"},
    {"http://host", "unsupported scheme"},
    {"localhost:6379", "missing scheme"},
    {"redis:/host", "missing scheme"},
    {"redis://", "missing host"},
    {"redis:///2", "missing host"},
    {"redis://host:0", "port must be between 1 and 65535"},
    {"redis://host:65536", "port is larger than 65535"},
    {"redis://host:99999999999999999999", "port is larger than 65535"},
    {"redis://host:abc", "port is not a decimal number"},
    {"redis://host:", "empty port"},
    {"redis://host:-1", "port must not be negative"},
    {"redis://host:63 79", "space or control character at offset 15"},
    {"redis://host/-1", "db must not be negative"},
    {"redis://host/abc", "db is not a decimal number"},
    {"redis://host/2147483648", "db is larger than 2147483647"},
    {"redis://host/99999999999999999999", "db is larger than 2147483647"},
    {"redis://host/2x", "unexpected characters after the db (at offset 14)"},
    {"redis://host/2/3", "unexpected characters after the db (at offset 14)"},
    {"redis://host:6379/1?db=2", "db is given twice"},
    {"redis://[::1", "without a closing ']'"},
    {"redis://[::1]x", "unexpected 'x' after ']'"},
    {"redis://[::1]]:6379", "unexpected ']' after ']'"},
    {"redis://[]", "empty IPv6 address"},
    {"redis://[zz::1]:6379", "invalid IPv6 address (at offset 9)"},
    {"redis://::1", "must be written in brackets"},
    {"redis://fe80::1:6379", "must be written in brackets"},
    {"redis://host]", "misplaced ']'"},
    {"redis://host[::1]", "must be written in brackets"},
    {"redis://ho[st", "misplaced '['"},
    {"redis://ho%41st", "invalid character '%' in the host (at offset 10)"},
    {"redis://ho st", "space or control character at offset 10"},
    {"redis://host\t", "space or control character at offset 12"},
    {"redis://host\x7f", "space or control character"},
    {"redis://h\xc3\xb6st", "non-ASCII byte at offset 9"},
    {"redis://host/1#frag", "fragments are not allowed"},
    {"redis://user:pw@", "missing host after '@'"},
    {"redis://:pw@:6379", "missing host"},
    {"redis://user@host", "needs a ':' before the password"},
    {"redis://user:@host", "empty password"},
    {"redis://:p%zzw@host", "invalid percent-escape in the password"},
    {"redis://:p%4@host", "invalid percent-escape in the password"},
    {"redis://u%g1:pw@host", "invalid percent-escape in the user"},
    {"redis://:p%00w@host", "contains %00"},
    {"redis://:a@b@host", "more than one '@'"},
    {"redis://:pa/ss@host", "'@' after the host"},
    {"redis://host?foo=1", "unknown query parameter at offset 13"},
    {"redis://host?", "empty query after '?'"},
    {"redis://host?db", "query parameter db has no value"},
    {"redis://host?db=1&", "empty query parameter"},
    {"redis://host?db=1&db=2", "db is given twice"},
    {"redis://host?db=", "empty db"},
    {"unix://", "has no socket path"},
    {"unix:///", "has no socket path"},
    {"unix:///?db=1", "has no socket path"},
    {"unix://tmp/redis.sock", "must be absolute"},
    {"unix://localhost/tmp/redis.sock", "must be absolute"},
    {"unix://:pw@tmp.sock", "missing or relative unix socket path"},
    {"unix://:pw@", "missing or relative unix socket path"},
    {"unix://:pw@host/tmp.sock", "take no host"},
    {"unix://:a@b@/tmp.sock", "more than one '@'"},
    {"unix://user@/tmp.sock", "needs a ':' before the password"},
    {"unix:///tmp/redis.sock?password=x", "unknown query parameter at offset 23"},
    {"unix:///tmp/redis.sock?db=-3", "db must not be negative"},
    {"unix:///tmp/redis.sock?db=1x", "unexpected characters after the db"},
    {"unix:///tmp/dir/", "ends in '/'"},
    {"unix:///tmp/%zz", "invalid percent-escape in the socket path"},
    {"unix:///tmp/a%00b", "contains %00"},
    {"redis-sentinel://h1,h2", "needs the master's name after '#'"},
    {"redis-sentinel://h1#", "needs the master's name after '#'"},
    {"redis-sentinel://h1#m#n", "'#' at offset 21"},
    {"redis-sentinel://h1,,h2#m", "missing host"},
    {"redis-sentinel://h1,#m", "missing host"},
    {"redis-sentinel://h1:0#m", "port must be between 1 and 65535"},
    {"redis-sentinel://h1/x#m", "db is not a decimal number (at offset 20)"},
    {"redis-sentinel://h1:26379,h 2#m", "space or control character at offset 27"},
    {"redis-sentinel://h1,h2:x#m", "port is not a decimal number (at offset 23)"},
    {"redis-sentinel://h1#m%zz", "invalid percent-escape in the master name"},
    {"redis-cluster://h1,h2/3", "takes no db"},
    {"redis-cluster://h1#m", "fragments are not allowed"},
    {"redis://h1,h2", "invalid character ','"},
    {"sentinel://h1#m", "unsupported scheme"},
};

static void check_invalid(const char *url, const char *reason)
{
    rlk_url u;
    char err[256];
    int rc;

    memset(&u, 0xa5, sizeof(u));
    memset(err, 'x', sizeof(err));
    rc = rlk_url_parse(url, &u, err, sizeof(err));
    if (rc != RLOCK_EINVAL) {
        fail_msg("'%s' returned %d, not RLOCK_EINVAL", url != NULL ? url : "(null)", rc);
    }
    assert_non_null(memchr(err, '\0', sizeof(err)));
    assert_true(strlen(err) > 0);
    if (strstr(err, reason) == NULL) {
        fail_msg("'%s': message \"%s\" does not contain \"%s\"", url, err, reason);
    }
    assert_zeroed(&u);
}

static void test_invalid_forms(void **state)
{
    size_t n = sizeof(invalid_cases) / sizeof(invalid_cases[0]);

    (void)state;
    assert_true(n >= 25);
    for (size_t i = 0; i < n; i++) {
        check_invalid(invalid_cases[i].url, invalid_cases[i].reason);
    }
}

/* Sentinel and cluster URLs: host lists with their default ports, the master name, tls. */
static void test_multi_host_forms(void **state)
{
    (void)state;
    rlk_url u;
    char err[256];
    assert_int_equal(rlk_url_parse("redis-sentinel://us:p%40w@h1,h2:26380,[::1]:7/3#my%20master",
                                   &u, err, sizeof(err)),
                     0);
    assert_int_equal(u.kind, RLK_URL_SENTINEL);
    assert_int_equal(u.tls, 0);
    assert_null(u.host);
    assert_int_equal((int)u.nhosts, 3);
    assert_string_equal(u.hosts[0].host, "h1");
    assert_int_equal(u.hosts[0].port, 26379);
    assert_string_equal(u.hosts[1].host, "h2");
    assert_int_equal(u.hosts[1].port, 26380);
    assert_string_equal(u.hosts[2].host, "::1");
    assert_int_equal(u.hosts[2].port, 7);
    assert_string_equal(u.user, "us");
    assert_string_equal(u.password, "p@w");
    assert_int_equal(u.db, 3);
    assert_string_equal(u.master_name, "my master");
    rlk_url_free(&u);
    assert_zeroed(&u);
    assert_int_equal(rlk_url_parse("REDISS-SENTINEL://h#m", &u, err, sizeof(err)), 0);
    assert_int_equal(u.kind, RLK_URL_SENTINEL);
    assert_int_equal(u.tls, 1);
    assert_int_equal((int)u.nhosts, 1);
    rlk_url_free(&u);
    assert_int_equal(rlk_url_parse("rediss-cluster://:pw@a,b:7001/", &u, err, sizeof(err)), 0);
    assert_int_equal(u.kind, RLK_URL_CLUSTER);
    assert_int_equal(u.tls, 1);
    assert_int_equal((int)u.nhosts, 2);
    assert_int_equal(u.hosts[0].port, 6379);
    assert_int_equal(u.hosts[1].port, 7001);
    assert_null(u.master_name);
    rlk_url_free(&u);
    assert_int_equal(rlk_url_parse("redis-cluster://a", &u, err, sizeof(err)), 0);
    assert_int_equal(u.tls, 0);
    rlk_url_free(&u);
}

static void test_null_input(void **state)
{
    (void)state;
    check_invalid(NULL, "NULL");
}

/* Returns a new string: prefix, then n copies of fill, then suffix. */
static char *make_url(const char *prefix, char fill, size_t n, const char *suffix)
{
    size_t lp = strlen(prefix);
    size_t ls = strlen(suffix);
    char *url = malloc(lp + n + ls + 1);

    assert_non_null(url);
    (void)snprintf(url, lp + 1, "%s", prefix);
    memset(url + lp, fill, n);
    memcpy(url + lp + n, suffix, ls + 1);
    return url;
}

static void test_length_limit(void **state)
{
    /* "redis://:" + password + "@h" with a password that makes the URL exactly 4096 bytes. */
    const size_t pwlen = RLK_URL_MAX - strlen("redis://:") - strlen("@h");
    char *url = make_url("redis://:", 'p', pwlen, "@h");
    rlk_url u;
    char err[128];

    (void)state;
    assert_int_equal(strlen(url), RLK_URL_MAX);
    assert_int_equal(rlk_url_parse(url, &u, err, sizeof(err)), 0);
    assert_int_equal(strlen(u.password), pwlen);
    assert_string_equal(u.host, "h");
    rlk_url_free(&u);
    free(url);

    /* One byte more is rejected. */
    url = make_url("redis://:", 'p', pwlen + 1, "@h");
    check_invalid(url, "longer than 4096 bytes");
    free(url);
}

/* The longest of a part: prefix + n fill characters parses, and the parsed field (the char *
 * at offset off of rlk_url) has want_len characters; prefix + n + 1 of them + bad_suffix is
 * refused with reason. */
static void check_longest(const char *prefix, char fill, size_t n, size_t off, size_t want_len,
                          const char *bad_suffix, const char *reason)
{
    char *url = make_url(prefix, fill, n, "");
    rlk_url u;
    assert_int_equal(rlk_url_parse(url, &u, NULL, 0), 0);
    assert_int_equal(strlen(*(char **)((char *)&u + off)), want_len);
    rlk_url_free(&u);
    free(url);
    url = make_url(prefix, fill, n + 1, bad_suffix);
    check_invalid(url, reason);
    free(url);
}

static void test_long_host_and_path(void **state)
{
    (void)state;
    /* A 253-character host is the DNS limit; 254 is too long. */
    check_longest("redis://", 'a', 253, offsetof(rlk_url, host), 253, ":6379", "longer than 253");
    /* A socket path that cannot fit in sockaddr_un.sun_path (108 bytes on Linux): 106 characters
     * are 107 bytes with the leading '/'. */
    check_longest("unix:///", 's', 106, offsetof(rlk_url, path), 107, "",
                  "unix socket path is longer than 107 bytes");
}

static void test_password_never_in_message(void **state)
{
    static const char *const urls[] = {
        "redis://:sup3rs3cret@host:0",    "redis://admin:sup3rs3cret@",
        "redis://admin:sup3rs3cret@[::1", "redis://:sup3rs3cret%zz@host",
        "unix://:sup3rs3cret@relative",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        rlk_url u;
        char err[256];

        assert_int_equal(rlk_url_parse(urls[i], &u, err, sizeof(err)), RLOCK_EINVAL);
        assert_true(strlen(err) > 0);
        assert_null(strstr(err, "sup3rs3cret"));
        assert_zeroed(&u);
    }
}

/* rediss:// is redis:// over TLS: the same grammar, tls set; no other scheme sets it. */
static void test_rediss_sets_tls(void **state)
{
    rlk_url u;
    (void)state;
    assert_int_equal(rlk_url_parse("rediss://user:pw@[::1]:6390/3", &u, NULL, 0), RLOCK_OK);
    assert_int_equal(u.tls, 1);
    assert_int_equal(u.is_unix, 0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 6390);
    assert_int_equal(u.db, 3);
    assert_string_equal(u.password, "pw");
    rlk_url_free(&u);
    assert_int_equal(rlk_url_parse("REDISS://host", &u, NULL, 0), RLOCK_OK);
    assert_int_equal(u.tls, 1);
    rlk_url_free(&u);
    assert_int_equal(rlk_url_parse("redis://host", &u, NULL, 0), RLOCK_OK);
    assert_int_equal(u.tls, 0);
    rlk_url_free(&u);
    assert_int_equal(rlk_url_parse("unix:///tmp/r.sock", &u, NULL, 0), RLOCK_OK);
    assert_int_equal(u.tls, 0);
    rlk_url_free(&u);
}

static void test_error_buffer_handling(void **state)
{
    rlk_url u;
    char small[8];
    char untouched[4] = "abc";

    (void)state;
    /* A short buffer gets a truncated, terminated message. */
    memset(small, 'x', sizeof(small));
    assert_int_equal(rlk_url_parse("http://host", &u, small, sizeof(small)), RLOCK_EINVAL);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, "unsuppo", 7);
    /* No buffer at all, or a zero-length one, is fine. */
    assert_int_equal(rlk_url_parse("http://host", &u, NULL, 0), RLOCK_EINVAL);
    assert_int_equal(rlk_url_parse("http://host", &u, untouched, 0), RLOCK_EINVAL);
    assert_string_equal(untouched, "abc");
    assert_zeroed(&u);
    /* No output struct. */
    assert_int_equal(rlk_url_parse("redis://host", NULL, small, sizeof(small)), RLOCK_EINVAL);
    assert_true(strlen(small) > 0);
}

static void test_free_is_safe(void **state)
{
    rlk_url u;

    (void)state;
    memset(&u, 0, sizeof(u));
    rlk_url_free(&u);
    rlk_url_free(NULL);
    assert_int_equal(rlk_url_parse("redis://a:b@c:1/2", &u, NULL, 0), 0);
    rlk_url_free(&u);
    assert_zeroed(&u);
    rlk_url_free(&u); /* freeing twice is harmless because free zeroes */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_forms),
        cmocka_unit_test(test_invalid_forms),
        cmocka_unit_test(test_multi_host_forms),
        cmocka_unit_test(test_null_input),
        cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_long_host_and_path),
        cmocka_unit_test(test_password_never_in_message),
        cmocka_unit_test(test_rediss_sets_tls),
        cmocka_unit_test(test_error_buffer_handling),
        cmocka_unit_test(test_free_is_safe),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
