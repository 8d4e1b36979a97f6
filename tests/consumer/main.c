/* Downstream smoke test: only the installed header and library. */
#include <rlock.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    rlock_options opts;
    char want[32];
    const char *version = rlock_version_string();
    const char *ok = rlock_strerror(RLOCK_OK);
    const char *timedout = rlock_strerror(RLOCK_ETIMEDOUT);

    rlock_options_init(&opts);
    snprintf(want, sizeof want, "%d.%d.%d", RLOCK_VERSION_MAJOR, RLOCK_VERSION_MINOR,
             RLOCK_VERSION_PATCH);

    if (version == NULL || strncmp(version, want, strlen(want)) != 0) {
        fprintf(stderr, "version: got %s, header says %s\n", version ? version : "(null)", want);
        return 1;
    }
    if (ok == NULL || timedout == NULL || timedout[0] == '\0') {
        fprintf(stderr, "rlock_strerror returned NULL or empty text\n");
        return 1;
    }
    if (opts.watchdog_timeout_ms != 30000) {
        fprintf(stderr, "rlock_options_init: watchdog_timeout_ms = %lld, want 30000\n",
                (long long)opts.watchdog_timeout_ms);
        return 1;
    }
    printf("rlock %s: ok=\"%s\" etimedout=\"%s\"\n", version, ok, timedout);
    return 0;
}
