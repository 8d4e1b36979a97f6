/*
 * libFuzzer target: the connection URL parser (src/base/url.c).
 *
 * Besides the sanitizers' checks, the parser's contract is asserted: it returns 0, RLOCK_EINVAL
 * or RLOCK_ENOMEM; a failure leaves the output zeroed and a NUL-terminated, non-empty reason; a
 * success gives exactly one of host and path, a port in range and a non-negative db.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rlock.h"
#include "url.h"

static int zeroed(const rlk_url *u)
{
    static const rlk_url zero;

    return memcmp(u, &zero, sizeof(zero)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    char err[256];
    rlk_url u;

    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0';
    memset(err, 'x', sizeof(err));
    int rc = rlk_url_parse(s, &u, err, sizeof(err));
    if (rc == RLOCK_OK) {
        if ((u.host == NULL) == (u.path == NULL) || u.is_unix != (u.path != NULL) || u.db < 0 ||
            (u.is_unix ? u.port != 0 : (u.port < 1 || u.port > 65535))) {
            abort();
        }
        rlk_url_free(&u);
    } else if ((rc != RLOCK_EINVAL && rc != RLOCK_ENOMEM) || !zeroed(&u) ||
               memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0') {
        abort();
    }
    free(s);
    return 0;
}
