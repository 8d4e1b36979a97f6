/*
 * rlock leader: shows the leader of each election NAME (rlock elect, rlock_election_*): its
 * value, term and since when, or that none leads now and the last term.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char cli_leader_usage[] =
    "usage: rlock [GLOBAL] leader [--json] [--] NAME...\n"
    "\n"
    "Shows the leader of each election NAME (rlock elect): its value, term and since when\n"
    "(UTC, on the Redis server's clock), or that no candidate leads now (with the last\n"
    "leader's term). Changes nothing.\n"
    "\n"
    "  --json   one JSON object per NAME and line: name, leader (true/false), value (null\n"
    "           without a leader), term, since_ms (ms since the Unix epoch; null without a\n"
    "           leader)\n"
    "\n"
    "Exit: 0 every NAME has a leader, 1 some NAME has none, 2 usage, 4 Redis error.\n";

/* since_ms (ms since the Unix epoch) as "YYYY-MM-DDTHH:MM:SS.mmmZ" in buf. */
static const char *cli_leader_utc(int64_t since_ms, char *buf, size_t size)
{
    time_t secs = (time_t)(since_ms / 1000);
    struct tm tm;
    char day[32];
    if (gmtime_r(&secs, &tm) == NULL || strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, size, "%" PRId64 " ms", since_ms);
    } else {
        snprintf(buf, size, "%s.%03dZ", day, (int)(since_ms % 1000));
    }
    return buf;
}

static void cli_leader_json(const char *name, int held, const char *value, uint64_t term,
                            int64_t since_ms)
{
    fputs("{\"name\":", stdout);
    cli_json_string(stdout, name, strlen(name));
    printf(",\"leader\":%s,\"value\":", held ? "true" : "false");
    if (value != NULL) {
        cli_json_string(stdout, value, strlen(value));
    } else {
        fputs("null", stdout);
    }
    printf(",\"term\":%" PRIu64, term);
    if (held) {
        printf(",\"since_ms\":%" PRId64 "}\n", since_ms);
    } else {
        fputs(",\"since_ms\":null}\n", stdout);
    }
}

static int cli_leader_one(rlock_client *client, const char *name, int json)
{
    rlock_election *e = rlock_election_open(client, name);
    char *value = NULL;
    uint64_t term = 0;
    int64_t since = 0;
    char when[64];
    int r = e != NULL ? rlock_election_leader_since(e, &value, &term, &since) : RLOCK_EINVAL;
    rlock_election_free(e);
    if (r < 0) {
        cli_report(name, r);
        return CLI_EXIT_ERROR;
    }
    if (json) {
        cli_leader_json(name, r == 1, value, term, since);
    } else if (r == 1) {
        printf("%s: leader %s, term %" PRIu64 ", since %s\n", name, value, term,
               cli_leader_utc(since, when, sizeof(when)));
    } else {
        printf("%s: no leader (last term %" PRIu64 ")\n", name, term);
    }
    free(value);
    return r == 1 ? CLI_EXIT_OK : CLI_EXIT_CONFLICT;
}

int cli_leader(const cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int json = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        if (c == 'j') {
            json = 1;
        } else if (c == 'h') {
            fputs(cli_leader_usage, stdout);
            return CLI_EXIT_OK;
        } else {
            return cli_option_error("leader", c, argv);
        }
    }
    int r = cli_names("leader", argc, argv);
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
        int one = cli_leader_one(client, argv[i], json);
        status = one == CLI_EXIT_ERROR || status == CLI_EXIT_OK ? one : status;
    }
    rlock_client_free(client);
    return status;
}
