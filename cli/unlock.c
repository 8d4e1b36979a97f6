/*
 * rlock unlock --force NAME...: breaks each lock whoever holds it (rlock_force_unlock), after
 * rlock_inspect() told which lock type wrote it, so that the type's own release wakes its
 * waiters (a fair lock's next waiter, a read-write lock's readers and writers).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char cli_unlock_usage[] =
    "usage: rlock [GLOBAL] unlock --force [--] NAME...\n"
    "\n"
    "Deletes each lock whoever holds it (this process, another host, a Redisson client) and\n"
    "wakes its waiters; prints what it did. The holder is not told: its next renewal finds the\n"
    "lock gone (rlock run then signals its command and exits 3).\n"
    "\n"
    "Exit: 0 if each lock was unlocked or already free, 2 usage (--force is required),\n"
    "4 on any error.\n";

static int cli_unlock_one(rlock_client *client, const char *name)
{
    rlock_lock_info *info = NULL;
    int rc = rlock_inspect(client, name, &info);
    if (rc != RLOCK_OK) {
        cli_report(name, rc);
        return CLI_EXIT_ERROR;
    }
    if (!info->locked) {
        printf("%s: not locked\n", name);
        rlock_lock_info_free(info);
        return CLI_EXIT_OK;
    }
    rlock_kind kind = RLOCK_REENTRANT;
    if (info->type == RLOCK_TYPE_FAIR) {
        kind = RLOCK_FAIR;
    } else if (info->type == RLOCK_TYPE_RW) {
        kind = info->mode != NULL && strcmp(info->mode, "write") == 0 ? RLOCK_WRITE : RLOCK_READ;
    }
    const char *type = cli_type_name(info->type);
    size_t holders = info->n_holders;
    rlock_lock_info_free(info);
    rlock *l = rlock_open(client, kind, name);
    rc = l != NULL ? rlock_force_unlock(l) : RLOCK_ENOMEM;
    rlock_free(l);
    if (rc < 0) {
        cli_report(name, rc);
        return CLI_EXIT_ERROR;
    }
    if (rc == 1) {
        printf("%s: unlocked (%s lock, %zu holder%s)\n", name, type, holders,
               holders == 1 ? "" : "s");
    } else {
        printf("%s: not locked\n", name); /* Released between the look and the unlock. */
    }
    return CLI_EXIT_OK;
}

int cli_unlock(const cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"force", no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int force = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:fh", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(cli_unlock_usage, stdout);
            return CLI_EXIT_OK;
        }
        if (c != 'f') {
            return cli_option_error("unlock", c, argv);
        }
        force = 1;
    }
    int r = cli_names("unlock", argc, argv);
    if (r >= 0) {
        return r;
    }
    if (!force) {
        /* Breaking someone else's lock is never the default: --force says it is meant. */
        return cli_usage_error("unlock", "--force is required: it breaks the lock whoever "
                                         "holds it");
    }
    int status = CLI_EXIT_ERROR;
    rlock_client *client = cli_connect(g, NULL, NULL, &status);
    if (client == NULL) {
        return status;
    }
    status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        if (cli_unlock_one(client, argv[i]) != CLI_EXIT_OK) {
            status = CLI_EXIT_ERROR;
        }
    }
    rlock_client_free(client);
    return status;
}
