/*
 * No error text or log line contains the password of a URL, however malformed the URL is.
 *
 * 20,000 URLs are made by mutating well-formed URLs that carry a known password (deleting,
 * inserting, replacing and moving bytes, with a fixed PRNG seed so a failure reproduces). Each is
 * parsed by rlk_url_parse() and, when rejected, also given to rlock_client_new() with a log
 * function attached (a rejected URL never dials). Neither the parser's reason, nor
 * rlock_last_error(), nor any logged line may contain three consecutive characters of the
 * password: quoting even a fragment of it would leak part of a secret. No server needed.
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

#define PASSWORD "Kq7Zx3Wv9"
#define MUTANTS  20000
#define URL_CAP  256

static const char *const seeds[] = {
    "redis://user:" PASSWORD "@host:6379/2",
    "redis://:" PASSWORD "@host",
    "redis://user:" PASSWORD "@[::1]:7000/3",
    "redis://us%40er:" PASSWORD "@h?db=4",
    "redis://user:" PASSWORD "@127.0.0.1:6380/",
    "unix://:" PASSWORD "@/tmp/redis.sock?db=1",
    "unix://user:" PASSWORD "@/run/r.sock",
    "redis-sentinel://user:" PASSWORD "@h1:26379,[::1],h3:26381/2#mymaster",
    "rediss-sentinel://:" PASSWORD "@h1#m",
    "redis-cluster://:" PASSWORD "@h1,h2:7001",
};

/* Bytes a mutation inserts: the URL grammar's delimiters are over-represented, so the mutants
 * cross every branch of the parser instead of failing at the first odd letter. */
static const char alphabet[] = ":@/?#[]%=&.-_:@/?[]%0123456789abcdefABCDEF xyzXYZ\x7f\x80";

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng(void)
{
    /* xorshift64*: deterministic across platforms, good enough to spread mutations. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(0x2545f4914f6cdd1d);
}

static size_t rng_below(size_t n)
{
    return n == 0 ? 0 : (size_t)(rng() % n);
}

/* Applies one random edit to url (NUL-terminated, capacity URL_CAP). */
static void mutate_once(char *url)
{
    size_t n = strlen(url);
    size_t at = rng_below(n + 1);
    char tmp[URL_CAP];

    switch (rng_below(5)) {
    case 0: /* delete one byte */
        if (at < n) {
            memmove(url + at, url + at + 1, n - at);
        }
        break;
    case 1: /* insert one byte */
        if (n + 1 < URL_CAP) {
            memmove(url + at + 1, url + at, n - at + 1);
            url[at] = alphabet[rng_below(sizeof(alphabet) - 1)];
        }
        break;
    case 2: /* replace one byte */
        if (at < n) {
            url[at] = alphabet[rng_below(sizeof(alphabet) - 1)];
        }
        break;
    case 3: { /* delete a run of bytes */
        size_t len = rng_below(n - (at < n ? at : n) + 1);

        memmove(url + at, url + at + len, n - at - len + 1);
        break;
    }
    default: { /* copy a run of bytes to another place: moves the password around */
        size_t from = rng_below(n);
        size_t len = 1 + rng_below(n - from);

        if (n + len < URL_CAP) {
            memcpy(tmp, url + from, len);
            memmove(url + at + len, url + at, n - at + 1);
            memcpy(url + at, tmp, len);
        }
        break;
    }
    }
}

/* 1 if text contains three consecutive characters of the password. */
static int leaks(const char *text)
{
    char window[4];

    for (size_t i = 0; i + 3 <= strlen(PASSWORD); i++) {
        memcpy(window, &PASSWORD[i], 3);
        window[3] = '\0';
        if (strstr(text, window) != NULL) {
            return 1;
        }
    }
    return 0;
}

static char log_lines[4096];

static void capture_log(int level, const char *msg, void *user_data)
{
    size_t used = strlen(log_lines);

    (void)level;
    (void)user_data;
    (void)snprintf(log_lines + used, sizeof(log_lines) - used, "%s\n", msg);
}

static void check_client_rejects(const char *url)
{
    rlock_options opts;
    rlock_client *c = NULL;
    int rc;

    rlock_options_init(&opts);
    opts.url = url;
    opts.log_fn = capture_log;
    opts.log_level = RLOCK_LOG_DEBUG;
    log_lines[0] = '\0';
    rc = rlock_client_new(&opts, &c);
    if (rc != RLOCK_EINVAL) {
        fail_msg("'%s': rlock_client_new returned %d after the parser rejected it", url, rc);
    }
    assert_null(c);
    if (leaks(rlock_last_error()) || leaks(log_lines)) {
        fail_msg("'%s': the password leaks into \"%s\" / \"%s\"", url, rlock_last_error(),
                 log_lines);
    }
}

/* The case the issue reported: a missing '@' makes the password read as the port. */
static void test_reported_case(void **state)
{
    char err[256];
    rlk_url u;

    (void)state;
    assert_int_equal(rlk_url_parse("redis://user:" PASSWORD, &u, err, sizeof(err)), RLOCK_EINVAL);
    assert_non_null(strstr(err, "port is not a decimal number"));
    assert_false(leaks(err));
    check_client_rejects("redis://user:" PASSWORD);
}

static void test_mutated_urls(void **state)
{
    size_t rejected = 0;
    size_t with_password = 0;

    (void)state;
    for (int i = 0; i < MUTANTS; i++) {
        char url[URL_CAP];
        char err[256];
        rlk_url u;
        int edits = 1 + (int)rng_below(4);

        (void)snprintf(url, sizeof(url), "%s", seeds[rng_below(sizeof(seeds) / sizeof(*seeds))]);
        for (int k = 0; k < edits; k++) {
            mutate_once(url);
        }
        with_password += strstr(url, PASSWORD) != NULL;
        int rc = rlk_url_parse(url, &u, err, sizeof(err));
        if (rc == RLOCK_OK) {
            rlk_url_free(&u);
            continue;
        }
        assert_int_equal(rc, RLOCK_EINVAL);
        rejected++;
        if (leaks(err)) {
            fail_msg("mutant %d '%s': the password leaks into \"%s\"", i, url, err);
        }
        check_client_rejects(url);
    }
    /* The corpus must exercise the property: most mutants are rejected, and many still carry
     * the whole password somewhere. */
    print_message("%zu of %d mutants rejected, %zu still carry the whole password\n", rejected,
                  MUTANTS, with_password);
    assert_true(rejected > MUTANTS / 4);
    assert_true(with_password > MUTANTS / 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reported_case),
        cmocka_unit_test(test_mutated_urls),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
