/*
 * One figure of a client's metrics, read from the text rlock_metrics_text() gives (what a
 * scraper reads), for tests that count what a known workload did; and a hook that records a
 * client's FAILOVER events. Header only.
 */
#ifndef RLOCK_TESTS_TC_METRIC_H
#define RLOCK_TESTS_TC_METRIC_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlock.h"

/* The value of the first sample called name (e.g. "rlock_acquire_total") whose labels contain
 * both l1 and l2 (e.g. "kind=\"latch\""; NULL: any). -1 when there is no such sample, -2 when
 * the client gives no text. */
static inline long long tc_metric(rlock_client *c, const char *name, const char *l1, const char *l2)
{
    char *text = NULL;
    if (rlock_metrics_text(c, &text) != RLOCK_OK) {
        return -2;
    }
    size_t n = strlen(name);
    long long v = -1;
    for (const char *p = text; v < 0 && *p != '\0';) {
        const char *end = strchr(p, '\n');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char line[1024];
        if (len < sizeof(line) && strncmp(p, name, n) == 0 && (p[n] == '{' || p[n] == ' ')) {
            memcpy(line, p, len);
            line[len] = '\0';
            char *labels_end = p[n] == '{' ? strchr(line, '}') : line + n;
            if (labels_end != NULL) {
                *labels_end = '\0';
                if ((l1 == NULL || strstr(line, l1) != NULL) &&
                    (l2 == NULL || strstr(line, l2) != NULL)) {
                    v = strtoll(labels_end + 1, NULL, 10);
                }
            }
        }
        p += len + (end != NULL);
    }
    rlock_metrics_free(text);
    return v;
}

/* The FAILOVER events one client's hook saw: how many, and the new master the last one named
 * ("host:port"), readable once n was loaded. rlock_client_on_event(c, tc_failover_hook, &f). */
typedef struct tc_failovers {
    atomic_int n;
    char detail[300];
} tc_failovers;

static inline void tc_failover_hook(const rlock_event *ev, void *user)
{
    tc_failovers *f = user;
    if (ev->type == RLOCK_EV_FAILOVER) {
        snprintf(f->detail, sizeof(f->detail), "%s", ev->detail);
        atomic_fetch_add(&f->n, 1);
    }
}

/* 1 when the last FAILOVER event named port as the new master's. */
static inline int tc_failover_port_is(const tc_failovers *f, int port)
{
    const char *colon = strrchr(f->detail, ':');
    return colon != NULL && strtol(colon + 1, NULL, 10) == port;
}

#endif
