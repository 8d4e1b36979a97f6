/*
 * rlock status [--json] [--semaphore] NAME...: a read-only look at each lock (rlock_inspect), or
 * each semaphore's available permits, as text for people or one JSON object per line for scripts.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char cli_status_usage[] =
    "usage: rlock [GLOBAL] status [--json] [--semaphore] [--] NAME...\n"
    "\n"
    "Reads each lock's keys without changing anything and shows its type (reentrant, fair,\n"
    "read-write, free), holders (<uuid>:<thread> and hold count), TTL, fencing counter, the\n"
    "fair queue (position, liveness deadline), the read-write mode and waiting writers, and\n"
    "the rlock threads waiting for a reentrant lock (Redisson's waiters leave no trace).\n"
    "A fair lock with an empty queue stores what a reentrant lock stores and shows as one.\n"
    "Works on locks held by Redisson clients (same data).\n"
    "\n"
    "  --json   one JSON object per NAME and line: name, type, locked, holders [{owner,\n"
    "           count}], ttl_ms, token, queue [{owner, deadline_ms}], mode, writers\n"
    "           [{owner, deadline_ms}], waiters [{owner, deadline_ms}], server_time_ms\n"
    "           (deadlines are the server's ms since the epoch)\n"
    "  --semaphore  each NAME is a semaphore (rlock run --semaphore): shows its available\n"
    "           permits (JSON: name, type \"semaphore\", available); expired leased permits\n"
    "           go back to the semaphore first, as on every semaphore call\n"
    "\n"
    "Exit: 0, 2 usage, 4 Redis error or a key that is not a lock (the others are still shown).\n";

static void cli_json_key(FILE *f, const char *k)
{
    fprintf(f, "\"%s\":", k);
}

static void cli_json_waiters(FILE *f, const char *key, const rlock_lock_waiter *w, size_t n)
{
    fprintf(f, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",{" : "{", f);
        cli_json_key(f, "owner");
        cli_json_string(f, w[i].owner, strlen(w[i].owner));
        fprintf(f, ",\"deadline_ms\":%" PRId64 "}", w[i].deadline_ms);
    }
    fputc(']', f);
}

static void cli_print_json(FILE *f, const rlock_lock_info *in)
{
    fputc('{', f);
    cli_json_key(f, "name");
    cli_json_string(f, in->name, strlen(in->name));
    fprintf(f, ",\"type\":\"%s\",\"locked\":%s,\"holders\":[", cli_type_name(in->type),
            in->locked ? "true" : "false");
    for (size_t i = 0; i < in->n_holders; i++) {
        fputs(i ? ",{" : "{", f);
        cli_json_key(f, "owner");
        cli_json_string(f, in->holders[i].owner, strlen(in->holders[i].owner));
        fprintf(f, ",\"count\":%" PRId64 "}", in->holders[i].count);
    }
    fprintf(f, "],\"ttl_ms\":%" PRId64 ",\"token\":%" PRIu64, in->ttl_ms, in->token);
    cli_json_waiters(f, "queue", in->queue, in->n_queue);
    if (in->mode != NULL) {
        fprintf(f, ",\"mode\":\"%s\"", in->mode);
    } else {
        fputs(",\"mode\":null", f);
    }
    cli_json_waiters(f, "writers", in->writers, in->n_writers);
    cli_json_waiters(f, "waiters", in->waiters, in->n_waiters);
    fprintf(f, ",\"server_time_ms\":%" PRId64 "}\n", in->server_time_ms);
}

static void cli_print_ttl(FILE *f, int64_t ttl)
{
    if (ttl == -1) {
        fputs("no expiry", f);
    } else if (ttl >= 0) {
        fprintf(f, "ttl %" PRId64 ".%03" PRId64 "s", ttl / 1000, ttl % 1000);
    } else {
        fputs("no key", f);
    }
}

static void cli_print_text(FILE *f, const rlock_lock_info *in)
{
    fprintf(f, "%s: %s, %s, ", in->name, cli_type_name(in->type),
            in->locked ? "locked" : "not locked");
    cli_print_ttl(f, in->ttl_ms);
    fprintf(f, ", token %" PRIu64 "\n", in->token);
    if (in->mode != NULL) {
        fprintf(f, "  mode     %s\n", in->mode);
    }
    for (size_t i = 0; i < in->n_holders; i++) {
        const char *o = in->holders[i].owner;
        size_t n = strlen(o);
        int w = n > 6 && strcmp(o + n - 6, ":write") == 0;
        fprintf(f, "  %s %s  count %" PRId64 "\n", w ? "writer  " : "holder  ", o,
                in->holders[i].count);
    }
    for (size_t i = 0; i < in->n_queue; i++) {
        fprintf(f, "  queue %zu  %s  deadline in %" PRId64 " ms\n", i + 1, in->queue[i].owner,
                in->queue[i].deadline_ms - in->server_time_ms);
    }
    for (size_t i = 0; i < in->n_writers; i++) {
        fprintf(f, "  waiting writer  %s  deadline in %" PRId64 " ms\n", in->writers[i].owner,
                in->writers[i].deadline_ms - in->server_time_ms);
    }
    for (size_t i = 0; i < in->n_waiters; i++) {
        fprintf(f, "  waiting  %s  deadline in %" PRId64 " ms\n", in->waiters[i].owner,
                in->waiters[i].deadline_ms - in->server_time_ms);
    }
}

/* One semaphore's line: its available permits (one script call, as cheap as a lock's). */
static int cli_status_semaphore(rlock_client *client, const char *name, int json)
{
    rlock_semaphore *sem = rlock_semaphore_open(client, name);
    int64_t n = sem != NULL ? rlock_semaphore_available(sem) : RLOCK_EINVAL;
    rlock_semaphore_free(sem);
    if (n < 0) {
        cli_report(name, (int)n);
        return CLI_EXIT_ERROR;
    }
    if (json) {
        fputc('{', stdout);
        cli_json_key(stdout, "name");
        cli_json_string(stdout, name, strlen(name));
        printf(",\"type\":\"semaphore\",\"available\":%" PRId64 "}\n", n);
    } else {
        printf("%s: semaphore, %" PRId64 " permit(s) available\n", name, n);
    }
    return CLI_EXIT_OK;
}

/* One lock's view; CLI_EXIT_OK or CLI_EXIT_ERROR (reported). */
static int cli_status_lock(rlock_client *client, const char *name, int json)
{
    rlock_lock_info *info = NULL;
    int rc = rlock_inspect(client, name, &info);
    if (rc != RLOCK_OK) {
        cli_report(name, rc);
        if (strstr(rlock_last_error(), "holds a Redis string") != NULL) {
            /* Semaphores and latches keep a string at NAME; only the user knows which. */
            fprintf(stderr, "rlock: %s: a semaphore? try rlock status --semaphore %s\n", name,
                    name);
        }
        return CLI_EXIT_ERROR;
    }
    if (json) {
        cli_print_json(stdout, info);
    } else {
        cli_print_text(stdout, info);
    }
    rlock_lock_info_free(info);
    return CLI_EXIT_OK;
}

int cli_status(const cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"semaphore", no_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int json = 0, sem = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        if (c == 'j') {
            json = 1;
        } else if (c == 's') {
            sem = 1;
        } else if (c == 'h') {
            fputs(cli_status_usage, stdout);
            return CLI_EXIT_OK;
        } else {
            return cli_option_error("status", c, argv);
        }
    }
    int r = cli_names("status", argc, argv);
    if (r >= 0) {
        return r;
    }
    int status = CLI_EXIT_ERROR;
    rlock_client *client = cli_connect(g, NULL, NULL, &status);
    if (client == NULL) {
        return status;
    }
    status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int one = sem ? cli_status_semaphore(client, argv[i], json)
                      : cli_status_lock(client, argv[i], json);
        status = one != CLI_EXIT_OK ? one : status;
    }
    rlock_client_free(client);
    return status;
}
