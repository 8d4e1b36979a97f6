/*
 * Private header: the connection URL parser (pure). Accepted forms: redis://, rediss://,
 * unix://, redis-sentinel:// (#MASTER_NAME) and redis-cluster://, the last two also as rediss-*;
 * the rules for hosts, ports, db, percent-encoded user, password and path, and the limits are in
 * docs/deployments.md ("URLs"). Error messages never contain the user or the password.
 */
#ifndef RLK_URL_H
#define RLK_URL_H

#include <stddef.h>

#define RLK_URL_MAX           4096
#define RLK_URL_DEFAULT_PORT  6379
#define RLK_URL_SENTINEL_PORT 26379
#define RLK_URL_HOSTS_MAX     64

/* What a URL points at. */
typedef enum { RLK_URL_STANDALONE = 0, RLK_URL_SENTINEL = 1, RLK_URL_CLUSTER = 2 } rlk_url_kind;

/* One host of a multi-host URL. */
typedef struct rlk_url_host {
    char *host; /* IPv6 without brackets */
    int port;
} rlk_url_host;

typedef struct rlk_url {
    int is_unix;    /* 1 for unix:// */
    char *host;     /* TCP host (IPv6 without brackets), NULL for unix */
    int port;       /* default 6379; 0 for unix */
    char *path;     /* unix socket path, NULL for tcp */
    char *user;     /* ACL user or NULL */
    char *password; /* or NULL */
    int db;         /* default 0 */
    int tls;        /* 1 for rediss:// and the rediss-* schemes */
    rlk_url_kind kind;
    rlk_url_host *hosts; /* Sentinels or cluster seeds (kind != STANDALONE), else NULL */
    size_t nhosts;
    char *master_name; /* the '#' of a Sentinel URL, else NULL */
} rlk_url;

/* Parses s into out (all strings malloc'd copies). On success returns 0 (RLOCK_OK). On malformed
 * input returns RLOCK_EINVAL and writes a human-readable reason into err (always NUL-terminated
 * when errlen > 0, possibly truncated; err may be NULL); out is left zeroed. On malloc failure
 * returns RLOCK_ENOMEM, out likewise zeroed. */
int rlk_url_parse(const char *s, rlk_url *out, char *err, size_t errlen);

/* Frees the strings and zeroes *u. Safe on a zeroed struct and on NULL. */
void rlk_url_free(rlk_url *u);

#endif /* RLK_URL_H */
