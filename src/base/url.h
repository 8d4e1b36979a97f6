/*
 * Private header: the connection URL parser.
 *
 * Accepted forms (scheme names are case-insensitive):
 *
 *   redis://[[user]:password@]host[:port][/[db]][?db=N]
 *   rediss://... (the same, over TLS: sets tls)
 *   unix://[[user]:password@]/absolute/path[?db=N]
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/[db]][?db=N]#MASTER_NAME
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
 *   rediss-sentinel:// and rediss-cluster:// (the same, with tls set)
 *
 * - host is a name (letters, digits, '-', '.', '_'), an IPv4 address, or an IPv6 address in
 *   brackets ("[::1]"; stored without them; zone ids are not supported).
 * - port is 1..65535 (default 6379); db is 0..2147483647 (default 0), given either as the path or
 *   as the query parameter db, not both. db is the only query parameter.
 * - user and password are percent-decoded; a userinfo part needs the ':' (Redis cannot AUTH with
 *   a user alone) and a non-empty password; an empty user means the default user. A raw '@', '/',
 *   '?' or '#' in them must be percent-encoded (%40, %2F, %3F, %23).
 * - For unix:// the userinfo, when present, sits between "unix://" and the path, as in
 *   "unix://:secret@/run/redis.sock?db=2"; the path is percent-decoded, must be absolute, must not
 *   end in '/' and must fit in sockaddr_un.sun_path.
 * - Sentinel URLs list the Sentinels (default port 26379, at most RLK_URL_HOSTS_MAX), name the
 *   master after '#' (percent-decoded, required); user, password and db are the data nodes'.
 *   Cluster URLs list seed nodes (default port 6379) and take no db and no '#'. A '#' anywhere
 *   else is an error.
 * - The whole URL is at most RLK_URL_MAX bytes of printable ASCII without spaces.
 * Error messages never contain the user or the password.
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
