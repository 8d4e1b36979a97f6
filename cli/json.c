/*
 * JSON string literals for `rlock status --json`. Lock names and owners are arbitrary bytes, so
 * every quote, backslash and control character is escaped; nothing else needs to be.
 */
#include "cli_pure.h"

void cli_json_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}
