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
#include "tc_redis.h"

static void check_kind(rh_server *s, rlock_kind kind)
{
    rlock_options o;
    cu_opts(&o, s);
    rlock_client *c = tc_client_as(&o, s, "nopub", "nopub-pw");
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

/* The user that may do everything but publish. */
static int add_nopub_user(rh_server *s)
{
    const char *acl[] = {"ACL", "SETUSER", "nopub", "on",       ">nopub-pw",
                         "~*",  "&*",      "+@all", "-publish", NULL};
    char *r = rh_cmd_str(s, acl);
    if (r == NULL) {
        return -1;
    }
    free(r);
    return 0;
}

int main(void)
{
    return tc_run_per_kind("tests", check_kind, add_nopub_user);
}
