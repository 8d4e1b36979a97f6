/*
 * What every rlock command shares: usage errors in one line, the NAME operands, the connection
 * from the global options, error reports and the lock type's name.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

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
