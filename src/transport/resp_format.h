/*
 * Private header: a request in RESP, the protocol's array of bulk strings, as Redis reads it.
 *
 * hiredis 0.14's redisFormatCommandArgv() writes each header ("*<argc>", "$<len>") with
 * sprintf(), whose format parsing was more than half of the client instructions of an
 * uncontended lock+unlock pair (callgrind, docs/performance.md). This writer sizes the
 * request first, allocates it once and writes the numbers with rlk_fmt_u64(). Libc only.
 */
#ifndef RLK_RESP_FORMAT_H
#define RLK_RESP_FORMAT_H

#include <stddef.h>

/* Writes argc arguments (argv[i] of lens[i] bytes, binary-safe; lens NULL: NUL-terminated
 * strings) as one RESP request into a new buffer *out (freed with free()), byte for byte what
 * redisFormatCommandArgv() writes. Returns its length, or -1 without memory (*out NULL). */
long long rlk_resp_format(int argc, const char *const *argv, const size_t *lens, char **out);

#endif /* RLK_RESP_FORMAT_H */
