#!/usr/bin/env python3
"""Parses an rlock metrics text (rlock_metrics_text) with prometheus_client's OpenMetrics parser
and checks that every family the API promises is there, with its type, and that each histogram's
+Inf bucket equals its count. Usage: parse_metrics.py FILE. Exit 0 when all holds."""
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

WANT = {
    "rlock_acquire": "counter",
    "rlock_acquire_wait_seconds": "histogram",
    "rlock_hold_seconds": "histogram",
    "rlock_holds": "gauge",
    "rlock_waiters": "gauge",
    "rlock_lost": "counter",
    "rlock_renewals": "counter",
    "rlock_replica_sync_failures": "counter",
    "rlock_reconnects": "counter",
    "rlock_failovers": "counter",
    "rlock_redis_commands": "counter",
    "rlock_pubsub_messages": "counter",
    "rlock_name_acquire": "counter",
    "rlock_name_acquire_wait_seconds": "histogram",
    "rlock_name_hold_seconds": "histogram",
}
KINDS = {"reentrant", "fair", "read", "write", "multi", "redlock", "semaphore",
         "semaphore_leased", "latch"}


def main(path):
    with open(path, encoding="utf-8") as f:
        families = {fam.name: fam for fam in text_string_to_metric_families(f.read())}
    bad = []
    for name, kind in WANT.items():
        if name not in families:
            bad.append("missing family " + name)
        elif families[name].type != kind:
            bad.append("%s is %s, not %s" % (name, families[name].type, kind))
    for fam in families.values():
        for s in fam.samples:
            if "kind" in s.labels and s.labels["kind"] not in KINDS:
                bad.append("unknown kind in " + s.name)
        if fam.type != "histogram":
            continue
        inf = {}
        count = {}
        for s in fam.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if s.name.endswith("_bucket") and s.labels.get("le") == "+Inf":
                inf[key] = s.value
            elif s.name.endswith("_count"):
                count[key] = s.value
        if inf != count:
            bad.append(fam.name + ": +Inf buckets differ from counts")
    kinds = {s.labels["kind"] for s in families["rlock_acquire"].samples}
    if kinds != KINDS:
        bad.append("rlock_acquire kinds: %s" % sorted(kinds))
    if not any(s.labels.get("name") == "obs-parse" and s.value == 1
               for s in families["rlock_name_acquire"].samples):
        bad.append("no rlock_name_acquire sample for obs-parse")
    for line in bad:
        print("parse_metrics:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
