/*
 * A user without the publish permission (ACL -publish): a release that happened reports success.
 * The release scripts delete the key first and publish last; publishing goes through redis.pcall,
 * so the refused PUBLISH no longer turns the whole release into RLOCK_EREDIS (and a retried unlock
 * into RLOCK_ELOST). Every single-key lock type, with a held count of two and then one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core_util.h"

static void check_kind(rh_server *s, rlock_kind kind)
{
    char url[128];
    rlock_options o;
    rlock_client *c = NULL;

    snprintf(url, sizeof(url), "redis://nopub:nopub-pw@127.0.0.1:%d", rh_port(s));
    cu_opts(&o, s);
    o.url = url;
    assert_int_equal(rlock_client_new(&o, &c), RLOCK_OK);
    rlock *l = rlock_open(c, kind, "acl-nopub");
    assert_non_null(l);
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_lock(l, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int r = rlock_unlock(l);
    print_message("kind %d: last release without publish -> %d (%s)\n", (int)kind, r,
                  r ? rlock_last_error() : "");
    assert_int_equal(r, RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(c);
}

static void test_reentrant(void **state)
{
    check_kind(*state, RLOCK_REENTRANT);
}

static void test_fair(void **state)
{
    check_kind(*state, RLOCK_FAIR);
}

static void test_read(void **state)
{
    check_kind(*state, RLOCK_READ);
}

static void test_write(void **state)
{
    check_kind(*state, RLOCK_WRITE);
}

static int setup_server(void **state)
{
    rh_server *s = cu_start(NULL);
    *state = s;
    if (s == NULL) {
        return -1;
    }
    const char *acl[] = {"ACL", "SETUSER", "nopub", "on",       ">nopub-pw",
                         "~*",  "&*",      "+@all", "-publish", NULL};
    char *r = rh_cmd_str(s, acl);
    if (r == NULL) {
        return -1;
    }
    free(r);
    return 0;
}

static int teardown_server(void **state)
{
    rh_free(*state);
    return 0;
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant),
        cmocka_unit_test(test_fair),
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_write),
    };
    return cmocka_run_group_tests(tests, setup_server, teardown_server);
}
