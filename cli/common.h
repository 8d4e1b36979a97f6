/*
 * What every rlock command shares (common.c): exit codes, the global options, usage errors,
 * the connection and error reports. Commands and main.c include it; it includes no command.
 */
#ifndef RLOCK_CLI_COMMON_H
#define RLOCK_CLI_COMMON_H

#include <stdint.h>

#include "cli_pure.h"
#include "rlock.h"

/* Exit codes (also in --help and rlock.1). rlock run otherwise exits with the command's status. */
#define CLI_EXIT_OK       0
#define CLI_EXIT_CONFLICT 1   /* not acquired within the wait (rlock run; -E changes it) */
#define CLI_EXIT_USAGE    2   /* bad command line */
#define CLI_EXIT_LOST     3   /* the lock was lost while the command ran */
#define CLI_EXIT_ERROR    4   /* Redis unreachable, Redis error, bad key ... */
#define CLI_EXIT_NOEXEC   126 /* the command could not be executed */
#define CLI_EXIT_NOTFOUND 127

/* Global options, before the command name. */
typedef struct cli_global {
    const char *url;             /* --url, $RLOCK_URL, $REDIS_URL, or the default */
    int64_t watchdog_timeout_ms; /* --watchdog-timeout or $RLOCK_WATCHDOG_TIMEOUT; 0 = default */
    int quiet;                   /* -q: no status line, no message for a skipped run */
    const char *tls_ca;          /* --tls-ca or $RLOCK_TLS_CA; NULL = the system's store */
    const char *tls_cert;        /* --tls-cert or $RLOCK_TLS_CERT */
    const char *tls_key;         /* --tls-key or $RLOCK_TLS_KEY */
    const char *tls_server_name; /* --tls-server-name or $RLOCK_TLS_SERVER_NAME */
    int tls_insecure;            /* --tls-insecure or $RLOCK_TLS_INSECURE=1 */
} cli_global;

/* Connects. On failure returns NULL and sets *status: CLI_EXIT_USAGE after a one-line usage
 * error for options the library refused (a malformed URL, an unreadable TLS file), else
 * CLI_EXIT_ERROR after "rlock: cannot connect to URL: <library message>" (the URL's user
 * information hidden). on_lost/user_data may be NULL. */
rlock_client *cli_connect(const cli_global *g, void (*on_lost)(const char *, void *),
                          void *user_data, int *status);

/* Prints "rlock: <what>: <rlock_last_error() or strerror>" on stderr. */
void cli_report(const char *what, int code);

/* Prints one line "rlock CMD: <fmt ...> (try rlock CMD --help)" on stderr (cmd NULL: the
 * global level) and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The usage error of getopt_long's return c ('?' unknown option, ':' missing value; getopt
 * runs with opterr = 0 and a ':' after the '+' of its option string). */
int cli_option_error(const char *cmd, int c, char **argv);

/* 1 if getopt_long's last word was "--" (it ended the options). */
int cli_dashdash_seen(char **argv);

/* Checks the NAME operands of status and unlock from argv[optind]: at least one, and no option
 * after the first (unless "--" ended the options, so that a name may begin with '-'). Returns
 * -1 to go on, or CLI_EXIT_USAGE after the error. */
int cli_names(const char *cmd, int argc, char **argv);

/* "reentrant", "fair", "read-write" or "free". */
const char *cli_type_name(rlock_lock_type t);

#endif
