/*
 * The pure parts of the rlock command (no Redis, no process state), unit-tested on their own:
 * DURATION parsing, signal names, JSON string escaping and URLs with their password hidden.
 */
#ifndef RLOCK_CLI_PURE_H
#define RLOCK_CLI_PURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Parses a DURATION: a non-negative integer followed by "ms", "s", "m", "h" or nothing
 * (milliseconds), e.g. "500ms", "10s", "5m", "1h", "250". Returns 0 and sets *ms, or -1 for
 * anything else (empty, sign, fraction, unknown unit, overflow past RLOCK_MAX_DURATION_MS). */
int cli_parse_duration(const char *s, int64_t *ms);

/* Parses a signal given as "TERM", "SIGTERM", "term" or a number ("15"). Returns the signal
 * number, or -1 if it names no signal. */
int cli_parse_signal(const char *s);

/* The name of signal sig without "SIG" ("TERM"), or NULL if unknown. */
const char *cli_signal_name(int sig);

/* Writes s (len bytes) to f as a JSON string literal, quotes included: ", \\ and control
 * characters escaped, bytes >= 0x80 passed through (lock names are UTF-8 in practice). */
void cli_json_string(FILE *f, const char *s, size_t len);

/* Writes url to out (n bytes, truncated if longer) with everything between the scheme's "//"
 * and the last '@' replaced by three '*': "redis://:Pw#x@h:1" is written as the scheme, the
 * stars and "@h:1". A URL without '@' is copied as it is. */
void cli_redact_url(const char *url, char *out, size_t n);

#endif
