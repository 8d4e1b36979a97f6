/*
 * DURATION arguments: the units people type in shells and cron lines (flock, timeout(1) and
 * systemd use the same suffixes), bare numbers meaning milliseconds like the library's API.
 */
#include <string.h>

#include "cli_pure.h"
#include "rlock.h"

static int64_t cli_unit_ms(const char *unit)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(unit, units[i].name) == 0) {
            return units[i].ms;
        }
    }
    return -1;
}

int cli_parse_duration(const char *s, int64_t *ms)
{
    int64_t v = 0;
    const char *p = s;
    if (s == NULL || *p < '0' || *p > '9') {
        return -1;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v > RLOCK_MAX_DURATION_MS) {
            return -1; /* Also keeps the multiplication below free of overflow. */
        }
    }
    int64_t unit = cli_unit_ms(p);
    if (unit < 0 || v > RLOCK_MAX_DURATION_MS / unit) {
        return -1;
    }
    *ms = v * unit;
    return 0;
}
