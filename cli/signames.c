/*
 * Signal names for --kill-signal and for messages. A table rather than sig2str(), which glibc
 * does not have.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_pure.h"

static const struct {
    const char *name;
    int sig;
} cli_signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"ABRT", SIGABRT},
    {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"BUS", SIGBUS},
    {"TRAP", SIGTRAP}, {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ}, {"WINCH", SIGWINCH},
    {"SYS", SIGSYS},
};

#define CLI_NSIG (sizeof(cli_signals) / sizeof(cli_signals[0]))

int cli_parse_signal(const char *s)
{
    if (s == NULL || *s == '\0') {
        return -1;
    }
    if (*s >= '0' && *s <= '9') {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        return (*end == '\0' && v > 0 && v < 65) ? (int)v : -1;
    }
    if (strncasecmp(s, "SIG", 3) == 0) {
        s += 3;
    }
    for (size_t i = 0; i < CLI_NSIG; i++) {
        if (strcasecmp(s, cli_signals[i].name) == 0) {
            return cli_signals[i].sig;
        }
    }
    return -1;
}

const char *cli_signal_name(int sig)
{
    for (size_t i = 0; i < CLI_NSIG; i++) {
        if (cli_signals[i].sig == sig) {
            return cli_signals[i].name;
        }
    }
    return NULL;
}
