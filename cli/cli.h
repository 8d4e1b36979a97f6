/*
 * The rlock command: what main.c shares with the command files (run.c, status.c, unlock.c).
 * The command uses the public API only (rlock.h).
 */
#ifndef RLOCK_CLI_H
#define RLOCK_CLI_H

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
    int quiet;                   /* -q: no status line */
} cli_global;

/* Connects; on failure prints "rlock: cannot connect to URL: <library message>" and returns
 * NULL. on_lost/user_data may be NULL. */
rlock_client *cli_connect(const cli_global *g, void (*on_lost)(const char *, void *),
                          void *user_data);

/* Prints "rlock: <what>: <rlock_last_error() or strerror>" on stderr. */
void cli_report(const char *what, int code);

/* Parses the options of a command that has one flag, --<name> (also -<short_name> when that is
 * not 0), besides --help, and needs at least one operand: sets *flag when it is given. Returns
 * -1 to go on with the operands at argv[optind], or the exit status: CLI_EXIT_OK after printing
 * usage on stdout for --help, CLI_EXIT_USAGE after printing it on stderr for anything else or
 * for no operand. */
int cli_flag_opts(int argc, char **argv, const char *name, char short_name, const char *usage,
                  int *flag);

int cli_run(const cli_global *g, int argc, char **argv);
int cli_status(const cli_global *g, int argc, char **argv);
int cli_unlock(const cli_global *g, int argc, char **argv);

/* "reentrant", "fair", "read-write" or "free". */
const char *cli_type_name(rlock_lock_type t);

#endif
