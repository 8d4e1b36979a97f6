/*
 * rlock [GLOBAL] COMMAND ...: global options, the URL's fallbacks, and dispatch to commands.
 * Commands parse their own options (getopt_long with a leading '+', so that the first operand
 * ends them and `--` hands the rest to the command being run).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char cli_usage[] =
    "usage: rlock [GLOBAL] COMMAND [ARGS]\n"
    "\n"
    "Distributed locks on Redis, compatible with Redisson's.\n"
    "\n"
    "Commands:\n"
    "  run     run a command while holding a lock        (rlock run --help)\n"
    "          or a semaphore permit (at most N at once)\n"
    "  status  show who holds a lock, its queue, its TTL  (rlock status --help)\n"
    "  unlock  break a lock whoever holds it             (rlock unlock --help)\n"
    "\n"
    "Global options:\n"
    "  --url URL                 redis://[[user]:password@]host[:port][/db] or\n"
    "                            unix:///path[?db=N]; default $RLOCK_URL, else $REDIS_URL,\n"
    "                            else redis://127.0.0.1:6379\n"
    "  --watchdog-timeout DUR    lease kept alive by the watchdog (default 30s;\n"
    "                            also $RLOCK_WATCHDOG_TIMEOUT)\n"
    "  -q, --quiet               no status line while waiting\n"
    "  -h, --help                this help;  -V, --version  the library version\n"
    "\n"
    "DURATION: 500ms, 10s, 5m, 1h, or bare milliseconds.\n"
    "\n"
    "Exit codes:\n"
    "  0    success (rlock run: the command's own status otherwise)\n"
    "  1    run: lock not acquired within the wait (or the value of -E)\n"
    "  2    usage error\n"
    "  3    run: the lock (permit) was lost while the command ran (the command was signalled)\n"
    "  4    Redis unreachable, Redis error, or a key that is not a lock\n"
    "  126  run: the command could not be executed;  127  command not found\n"
    "  128+N  run: the command died of signal N, or rlock got SIGINT (130) / SIGTERM (143)\n"
    "       while waiting\n";

static int cli_global_parse(cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'}, {"watchdog-timeout", required_argument, NULL, 'w'},
        {"quiet", no_argument, NULL, 'q'},     {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},   {NULL, 0, NULL, 0}};
    const char *wd = getenv("RLOCK_WATCHDOG_TIMEOUT");
    int c;
    while ((c = getopt_long(argc, argv, "+qhV", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            g->url = optarg;
            break;
        case 'w':
            wd = optarg;
            break;
        case 'q':
            g->quiet = 1;
            break;
        case 'h':
            fputs(cli_usage, stdout);
            exit(CLI_EXIT_OK);
        case 'V':
            printf("rlock %s\n", rlock_version_string());
            exit(CLI_EXIT_OK);
        default:
            fputs(cli_usage, stderr);
            return -1;
        }
    }
    if (wd != NULL &&
        (cli_parse_duration(wd, &g->watchdog_timeout_ms) != 0 || g->watchdog_timeout_ms < 3)) {
        fprintf(stderr, "rlock: bad watchdog timeout '%s' (a DURATION of at least 3ms)\n", wd);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    cli_global g = {0};
    g.url = getenv("RLOCK_URL");
    if (g.url == NULL || *g.url == '\0') {
        g.url = getenv("REDIS_URL");
    }
    if (g.url == NULL || *g.url == '\0') {
        g.url = "redis://127.0.0.1:6379";
    }
    if (cli_global_parse(&g, argc, argv) != 0) {
        return CLI_EXIT_USAGE;
    }
    if (optind >= argc) {
        fputs(cli_usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* Restarts getopt for the command's own options (glibc). */
    if (strcmp(cmd, "run") == 0) {
        return cli_run(&g, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "status") == 0) {
        return cli_status(&g, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "unlock") == 0) {
        return cli_unlock(&g, sub_argc, sub_argv);
    }
    fprintf(stderr, "rlock: unknown command '%s' (try rlock --help)\n", cmd);
    return CLI_EXIT_USAGE;
}

/* Writes url to f with its user information (user and password) replaced by "***": no message of
 * the command may show a password, as none of the library's does. */
static void cli_print_url(FILE *f, const char *url)
{
    const char *scheme = strstr(url, "://");
    const char *host = scheme != NULL ? scheme + 3 : url;
    size_t authority = strcspn(host, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < authority; i++) {
        at = host[i] == '@' ? host + i : at;
    }
    if (at == NULL) {
        fputs(url, f);
        return;
    }
    fprintf(f, "%.*s***%s", (int)(host - url), url, at);
}

rlock_client *cli_connect(const cli_global *g, void (*on_lost)(const char *, void *),
                          void *user_data)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = g->url;
    o.pool_size = 4; /* One command needs few connections; the server's count stays low. */
    if (g->watchdog_timeout_ms > 0) {
        o.watchdog_timeout_ms = g->watchdog_timeout_ms;
    }
    o.on_lost = on_lost;
    o.user_data = user_data;
    rlock_client *c = NULL;
    int rc = rlock_client_new(&o, &c);
    if (rc != RLOCK_OK) {
        const char *msg = rlock_last_error();
        fputs("rlock: cannot connect to ", stderr);
        cli_print_url(stderr, g->url);
        fprintf(stderr, ": %s\n", *msg != '\0' ? msg : rlock_strerror(rc));
        return NULL;
    }
    return c;
}

int cli_flag_opts(int argc, char **argv, const char *name, char short_name, const char *usage,
                  int *flag)
{
    /* The flag's value is 1, whichever spelling was used; '?' can be neither. */
    const struct option opts[] = {
        {name, no_argument, NULL, 1}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    char shorts[4] = {'+', 'h', short_name, '\0'};
    int c;
    while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        if (c == 1 || (short_name != 0 && c == short_name)) {
            *flag = 1;
        } else if (c == 'h') {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        } else {
            fputs(usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

void cli_report(const char *what, int code)
{
    const char *msg = rlock_last_error();
    fprintf(stderr, "rlock: %s: %s\n", what, *msg != '\0' ? msg : rlock_strerror(code));
}

const char *cli_type_name(rlock_lock_type t)
{
    switch (t) {
    case RLOCK_TYPE_REENTRANT:
        return "reentrant";
    case RLOCK_TYPE_FAIR:
        return "fair";
    case RLOCK_TYPE_RW:
        return "read-write";
    default:
        return "free";
    }
}
