/*
 * rlock [GLOBAL] COMMAND ...: global options (the URL, TLS), their environment fallbacks, and
 * dispatch to commands. Commands parse their own options (getopt_long with a leading '+', so
 * that the first operand ends them and `--` hands the rest to the command being run).
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
    "  elect   run a command while this host leads       (rlock elect --help)\n"
    "  leader  show an election's leader and term        (rlock leader --help)\n"
    "  top     live view of locks, semaphores, latches   (rlock top --help)\n"
    "\n"
    "Global options:\n"
    "  --url URL                 default $RLOCK_URL, else $REDIS_URL, else\n"
    "                            redis://127.0.0.1:6379. URL is one of\n"
    "      redis://[[user]:password@]host[:port][/db]\n"
    "      rediss://...                      the same over TLS\n"
    "      unix:///path[?db=N]               a unix socket (unix://:password@/path)\n"
    "      redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#MASTER\n"
    "      redis-cluster://[[user]:password@]host[:port][,host[:port]...]\n"
    "                            (rediss-sentinel://, rediss-cluster://: over TLS);\n"
    "                            percent-encode '@' '/' '?' '#' in a password\n"
    "  --tls-ca FILE             CAs to trust, PEM ($RLOCK_TLS_CA; default: the system's)\n"
    "  --tls-cert FILE           client certificate, PEM ($RLOCK_TLS_CERT)\n"
    "  --tls-key FILE            its private key, PEM ($RLOCK_TLS_KEY)\n"
    "  --tls-server-name NAME    name checked in the server's certificate and sent as SNI\n"
    "                            ($RLOCK_TLS_SERVER_NAME; default: the URL's host)\n"
    "  --tls-insecure            do not verify the server's certificate (tests only;\n"
    "                            $RLOCK_TLS_INSECURE=1)\n"
    "  --watchdog-timeout DUR    lease kept alive by the watchdog (default 30s;\n"
    "                            also $RLOCK_WATCHDOG_TIMEOUT)\n"
    "  -q, --quiet               no status line while waiting, no message for a skip\n"
    "  -h, --help                this help;  -V, --version  the library version\n"
    "\n"
    "DURATION: 500ms, 10s, 5m, 1h, or bare milliseconds.\n"
    "\n"
    "Exit codes:\n"
    "  0    success (rlock run: the command's own status otherwise)\n"
    "  1    run: lock not acquired within the wait (or the value of -E)\n"
    "  2    usage error (also a malformed URL or an unreadable TLS file)\n"
    "  3    run: the lock (permit) was lost, or its --lease ended, while the command ran\n"
    "       (the command was signalled)\n"
    "  4    Redis unreachable, Redis error, or a key that is not a lock\n"
    "  126  run: the command could not be executed;  127  command not found\n"
    "  128+N  run: the command died of signal N, or rlock got SIGINT (130) / SIGTERM (143)\n"
    "       while waiting\n";

/* The environment's defaults of the global options; the command line overrides them. */
static void cli_global_env(cli_global *g)
{
    const char *names[] = {"RLOCK_URL", "REDIS_URL"};
    g->url = "redis://127.0.0.1:6379";
    for (int i = 1; i >= 0; i--) {
        const char *v = getenv(names[i]);
        g->url = v != NULL && *v != '\0' ? v : g->url;
    }
    g->tls_ca = getenv("RLOCK_TLS_CA");
    g->tls_cert = getenv("RLOCK_TLS_CERT");
    g->tls_key = getenv("RLOCK_TLS_KEY");
    g->tls_server_name = getenv("RLOCK_TLS_SERVER_NAME");
}

/* The values that need checking, after the options: both may come from the environment. */
static int cli_global_check(cli_global *g, const char *wd)
{
    const char *insecure = getenv("RLOCK_TLS_INSECURE");
    if (!g->tls_insecure && insecure != NULL && *insecure != '\0') {
        if (strcmp(insecure, "0") != 0 && strcmp(insecure, "1") != 0) {
            return cli_usage_error(NULL, "bad RLOCK_TLS_INSECURE '%s' (0 or 1)", insecure);
        }
        g->tls_insecure = insecure[0] == '1';
    }
    if (wd != NULL &&
        (cli_parse_duration(wd, &g->watchdog_timeout_ms) != 0 || g->watchdog_timeout_ms < 3)) {
        return cli_usage_error(NULL, "bad watchdog timeout '%s' (a DURATION of at least 3ms)", wd);
    }
    return 0;
}

/* One global option with a value (or --tls-insecure); 0, or -1 if c is none of them. */
static int cli_global_opt(cli_global *g, int c, const char **wd)
{
    switch (c) {
    case 'u':
        g->url = optarg;
        return 0;
    case 'w':
        *wd = optarg;
        return 0;
    case 'A':
        g->tls_ca = optarg;
        return 0;
    case 'C':
        g->tls_cert = optarg;
        return 0;
    case 'K':
        g->tls_key = optarg;
        return 0;
    case 'N':
        g->tls_server_name = optarg;
        return 0;
    case 'I':
        g->tls_insecure = 1;
        return 0;
    case 'q':
        g->quiet = 1;
        return 0;
    default:
        return -1;
    }
}

static int cli_global_parse(cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"watchdog-timeout", required_argument, NULL, 'w'},
                                         {"tls-ca", required_argument, NULL, 'A'},
                                         {"tls-cert", required_argument, NULL, 'C'},
                                         {"tls-key", required_argument, NULL, 'K'},
                                         {"tls-server-name", required_argument, NULL, 'N'},
                                         {"tls-insecure", no_argument, NULL, 'I'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    const char *wd = getenv("RLOCK_WATCHDOG_TIMEOUT");
    int c;
    cli_global_env(g);
    while ((c = getopt_long(argc, argv, "+:qhV", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(cli_usage, stdout);
            exit(CLI_EXIT_OK);
        }
        if (c == 'V') {
            printf("rlock %s\n", rlock_version_string());
            exit(CLI_EXIT_OK);
        }
        if (cli_global_opt(g, c, &wd) != 0) {
            return cli_option_error(NULL, c, argv);
        }
    }
    return cli_global_check(g, wd);
}

int main(int argc, char **argv)
{
    cli_global g = {0};
    opterr = 0; /* Every option error is reported by cli_option_error(), in one line. */
    if (cli_global_parse(&g, argc, argv) != 0) {
        return CLI_EXIT_USAGE;
    }
    if (optind >= argc) {
        return cli_usage_error(NULL, "missing COMMAND (run, status, unlock, elect, leader or top)");
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
    if (strcmp(cmd, "elect") == 0) {
        return cli_elect(&g, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "leader") == 0) {
        return cli_leader(&g, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "unlock") == 0) {
        return cli_unlock(&g, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "top") == 0) {
        return cli_top(&g, sub_argc, sub_argv);
    }
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
