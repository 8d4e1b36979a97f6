/*
 * URLs in messages: the user information (user and password) replaced by "***", so that no
 * message of the command shows a password, whatever characters it holds.
 */
#include <stdio.h>
#include <string.h>

#include "cli_pure.h"

void cli_redact_url(const char *url, char *out, size_t n)
{
    const char *scheme = strstr(url, "://");
    const char *rest = scheme != NULL ? scheme + 3 : url;
    /* The last '@' ends the user information: a password typed without percent-encoding may
     * hold '@', '/', '?', '#' or ':', and a host never holds '@'. */
    const char *at = strrchr(rest, '@');
    if (at == NULL) {
        snprintf(out, n, "%s", url);
        return;
    }
    snprintf(out, n, "%.*s***%s", (int)(rest - url), url, at);
}
