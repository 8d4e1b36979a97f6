/*
 * rlock leader: shows the leader of each election NAME (rlock elect, rlock_election_*): its
 * value and term, or that none leads now and the last term.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char cli_leader_usage[] =
    "usage: rlock [GLOBAL] leader [--json] [--] NAME...\n"
    "\n"
    "Shows the leader of each election NAME (rlock elect): its value and term, or that no\n"
    "candidate leads now (with the last leader's term). Changes nothing.\n"
    "\n"
    "  --json   one JSON object per NAME and line: name, leader (true/false), value (null\n"
    "           without a leader), term\n"
    "\n"
    "Exit: 0 every NAME has a leader, 1 some NAME has none, 2 usage, 4 Redis error.\n";

static int cli_leader_one(rlock_client *client, const char *name, int json)
{
    rlock_election *e = rlock_election_open(client, name);
    char *value = NULL;
    uint64_t term = 0;
    int r = e != NULL ? rlock_election_leader(e, &value, &term) : RLOCK_EINVAL;
    rlock_election_free(e);
    if (r < 0) {
        cli_report(name, r);
        return CLI_EXIT_ERROR;
    }
    if (json) {
        fputs("{\"name\":", stdout);
        cli_json_string(stdout, name, strlen(name));
        printf(",\"leader\":%s,\"value\":", r == 1 ? "true" : "false");
        if (value != NULL) {
            cli_json_string(stdout, value, strlen(value));
        } else {
            fputs("null", stdout);
        }
        printf(",\"term\":%" PRIu64 "}\n", term);
    } else if (r == 1) {
        printf("%s: leader %s, term %" PRIu64 "\n", name, value, term);
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
