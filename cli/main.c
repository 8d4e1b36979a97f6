/*
 * rlock [GLOBAL] COMMAND ...: global options (the URL, TLS), their environment fallbacks, and
 * dispatch to commands. Commands parse their own options (getopt_long with a leading '+', so
 * that the first operand ends them and `--` hands the rest to the command being run).
 */
#include <getopt.h>
#include <stdarg.h>
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

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    const char *sp = cmd != NULL ? " " : "";
    cmd = cmd != NULL ? cmd : "";
    va_list ap;
    fprintf(stderr, "rlock%s%s: ", sp, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try rlock%s%s --help)\n", sp, cmd);
    return CLI_EXIT_USAGE;
}

int cli_option_error(const char *cmd, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':') {
        return cli_usage_error(cmd, "option '%s' needs a value", arg);
    }
    /* glibc leaves optopt 0 for an unknown long option, whose word getopt has passed. */
    if (optopt == 0 || strncmp(arg, "--", 2) == 0) {
        return cli_usage_error(cmd, "unknown option '%s'", arg);
    }
    return cli_usage_error(cmd, "unknown option '-%c'", optopt);
}

int cli_dashdash_seen(char **argv)
{
    return optind > 1 && strcmp(argv[optind - 1], "--") == 0;
}

int cli_names(const char *cmd, int argc, char **argv)
{
    if (optind >= argc) {
        return cli_usage_error(cmd, "missing NAME");
    }
    /* After "--" every word is a name, so a name may begin with '-'. */
    if (cli_dashdash_seen(argv)) {
        return -1;
    }
    for (int i = optind + 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "option '%s' after NAME: options go before the names",
                                   argv[i]);
        }
    }
    return -1;
}

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
        return cli_usage_error(NULL, "missing COMMAND (run, status, unlock, elect or leader)");
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
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}

/* The client's options from the global ones. */
static void cli_client_options(const cli_global *g, rlock_options *o)
{
    rlock_options_init(o);
    o->url = g->url;
    o->pool_size = 4; /* One command needs few connections; the server's count stays low. */
    if (g->watchdog_timeout_ms > 0) {
        o->watchdog_timeout_ms = g->watchdog_timeout_ms;
    }
    o->tls_ca_file = g->tls_ca;
    o->tls_cert_file = g->tls_cert;
    o->tls_key_file = g->tls_key;
    o->tls_server_name = g->tls_server_name;
    o->tls_insecure = g->tls_insecure;
}

rlock_client *cli_connect(const cli_global *g, void (*on_lost)(const char *, void *),
                          void *user_data, int *status)
{
    rlock_options o;
    cli_client_options(g, &o);
    o.on_lost = on_lost;
    o.user_data = user_data;
    rlock_client *c = NULL;
    int rc = rlock_client_new(&o, &c);
    if (rc == RLOCK_OK) {
        return c;
    }
    const char *msg = rlock_last_error();
    msg = *msg != '\0' ? msg : rlock_strerror(rc);
    if (rc == RLOCK_EINVAL) {
        /* What the user gave is wrong (a malformed URL, a TLS file): a usage error. The URL is
         * not shown, since a malformed one may hold a password anywhere; the library's message
         * never quotes it. */
        *status = cli_usage_error(NULL, "%s", msg);
        return NULL;
    }
    char url[1024];
    cli_redact_url(g->url, url, sizeof(url));
    fprintf(stderr, "rlock: cannot connect to %s: %s\n", url, msg);
    *status = CLI_EXIT_ERROR;
    return NULL;
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
