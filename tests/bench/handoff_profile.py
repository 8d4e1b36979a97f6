#!/usr/bin/env python3
"""Where a hand-off's time goes: lines up the bench's hand-off records with a scheduler trace.

Usage: handoff_profile.py TRACE PERF_SCRIPT_OUTPUT

TRACE is the file rlock_bench appends to when RLOCK_BENCH_TRACE is set: one line per hand-off,
"<kind> <ideal|rlock> <unlock_ns> <acquire_ns> <unlocker_tid> <acquirer_tid>" (CLOCK_MONOTONIC).
PERF_SCRIPT_OUTPUT is `perf script` of a `perf sched record -k mono` taken during the same run,
so both use one clock. tests/bench/profile_handoff.sh runs all of it.

For each hand-off it follows the chain of wake-ups that ends in the acquirer returning, walking
back from the acquire: the acquirer's last wake-up before it returned (the reply to its winning
attempt, from redis-server), the time it went to sleep before that (it had just sent the
attempt), the wake-up that started its run (from redis-server for a raw waiter reading its own
subscriber connection, from the client's subscriber thread for rlock), and for rlock the
subscriber thread's own wake-up (the published message). Every segment is printed as a median
over the hand-offs in microseconds, relative to the unlock returning. "sched delay" is the time
from a thread being woken to it running on a vCPU.
"""
import bisect
import re
import statistics
import sys
from collections import defaultdict

WAKE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_wak(?:eup|ing):.*?pid=(\d+)")
SWITCH = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:"
                    r".*?prev_pid=(\d+).*?==>.*?next_pid=(\d+)")


def load_perf(path):
    """Returns per-thread sorted lists: wakeups (time, waker_tid, waker_comm), runs (switch-in
    times) and sleeps (switch-out times)."""
    wakes = defaultdict(list)
    runs = defaultdict(list)
    sleeps = defaultdict(list)
    comm = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = WAKE.match(line)
            if m:
                waker_comm, waker, _, t, target = m.groups()
                comm[int(waker)] = waker_comm.strip()
                wakes[int(target)].append((float(t) * 1e6, int(waker)))
                continue
            m = SWITCH.match(line)
            if m:
                _, _, _, t, prev, nxt = m.groups()
                sleeps[int(prev)].append(float(t) * 1e6)
                runs[int(nxt)].append(float(t) * 1e6)
    for d in (wakes, runs, sleeps):
        for v in d.values():
            v.sort()
    return wakes, runs, sleeps, comm


class Index:
    """Sorted times per thread, bisectable."""

    def __init__(self, wakes, runs, sleeps):
        self.wakes = wakes
        self.wake_t = {k: [w[0] for w in v] for k, v in wakes.items()}
        self.runs = runs
        self.sleeps = sleeps

    def wake_before(self, tid, t):
        ts = self.wake_t.get(tid, [])
        i = bisect.bisect_right(ts, t)
        return self.wakes[tid][i - 1] if i > 0 else None

    def first_after(self, d, tid, t):
        ts = d.get(tid, [])
        i = bisect.bisect_left(ts, t)
        return ts[i] if i < len(ts) else None

    def last_before(self, d, tid, t):
        ts = d.get(tid, [])
        i = bisect.bisect_right(ts, t)
        return ts[i - 1] if i > 0 else None


def chain(ix, comm, rec):
    """Segments (name -> us since the unlock returned) of one hand-off, or None if the trace
    does not show a complete chain."""
    unlock, acq, acquirer = rec
    seg = {}
    reply = ix.wake_before(acquirer, acq)  # the reply that made the acquire return
    if reply is None or reply[0] < unlock - 2000:
        return None
    seg["reply: redis wakes the acquirer"] = reply[0]
    run2 = ix.first_after(ix.runs, acquirer, reply[0])
    if run2 is None or run2 > acq:
        return None
    seg["acquirer runs again"] = run2
    sent = ix.last_before(ix.sleeps, acquirer, reply[0])  # asleep after sending the attempt
    if sent is None:
        return None
    seg["acquirer sent the attempt and slept"] = sent
    woke = ix.wake_before(acquirer, sent)  # the wake-up that started this run
    if woke is None or woke[0] < unlock - 2000:
        return None
    seg["acquirer woken (by %s)" % ("redis" if "redis" in comm.get(woke[1], "") else
                                    "the subscriber thread")] = woke[0]
    run1 = ix.first_after(ix.runs, acquirer, woke[0])
    if run1 is not None and run1 <= sent:
        seg["acquirer runs"] = run1
    if "redis" not in comm.get(woke[1], ""):
        sub = woke[1]
        sw = ix.wake_before(sub, woke[0])
        if sw is not None and sw[0] >= unlock - 2000:
            seg["subscriber thread woken (message)"] = sw[0]
            sr = ix.first_after(ix.runs, sub, sw[0])
            if sr is not None and sr <= woke[0]:
                seg["subscriber thread runs"] = sr
    seg["acquire returns"] = acq
    return {k: v - unlock for k, v in seg.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    groups = defaultdict(list)
    with open(sys.argv[1]) as f:
        for line in f:
            kind, mode, unlock, acq, _, acquirer = line.split()
            groups[(kind, mode)].append((int(unlock) / 1e3, int(acq) / 1e3, int(acquirer)))
    wakes, runs, sleeps, comm = load_perf(sys.argv[2])
    ix = Index(wakes, runs, sleeps)
    order = ["subscriber thread woken (message)", "subscriber thread runs",
             "acquirer woken (by redis)", "acquirer woken (by the subscriber thread)",
             "acquirer runs", "acquirer sent the attempt and slept",
             "reply: redis wakes the acquirer", "acquirer runs again", "acquire returns"]
    for (kind, mode), recs in sorted(groups.items()):
        chains = [c for c in (chain(ix, comm, r) for r in recs) if c is not None]
        print("%s %s: %d hand-offs, %d with a complete chain in the trace" %
              (kind, mode, len(recs), len(chains)))
        if not chains:
            continue
        print("  %-46s %12s %8s" % ("step (median over hand-offs)", "us after", "n"))
        print("  %-46s %12s" % ("unlock returned", "0.0"))
        for name in order:
            vals = [c[name] for c in chains if name in c]
            if len(vals) >= len(chains) / 2:
                print("  %-46s %12.1f %8d" % (name, statistics.median(vals), len(vals)))
        # Per-step durations, each over the hand-offs that have both ends.
        pairs = [("subscriber thread woken (message)", "subscriber thread runs",
                  "subscriber thread sched delay"),
                 ("subscriber thread runs", "acquirer woken (by the subscriber thread)",
                  "subscriber thread: read, parse, wake"),
                 ("acquirer woken (by the subscriber thread)", "acquirer runs",
                  "acquirer sched delay (1st)"),
                 ("acquirer woken (by redis)", "acquirer runs", "acquirer sched delay (1st)"),
                 ("acquirer runs", "acquirer sent the attempt and slept",
                  "acquirer: until the attempt is sent"),
                 ("acquirer sent the attempt and slept", "reply: redis wakes the acquirer",
                  "redis: wake-up, script, reply"),
                 ("reply: redis wakes the acquirer", "acquirer runs again",
                  "acquirer sched delay (2nd)"),
                 ("acquirer runs again", "acquire returns", "acquirer: parse, grant, return")]
        print("  %-46s %12s %8s" % ("duration (median)", "us", "n"))
        for a, b, label in pairs:
            vals = [c[b] - c[a] for c in chains if a in c and b in c]
            if len(vals) >= len(chains) / 2:
                print("  %-46s %12.1f %8d" % (label, statistics.median(vals), len(vals)))
        total = [c["acquire returns"] for c in chains]
        print("  %-46s %12.1f" % ("hand-off (unlock returned -> acquire returned)",
                                  statistics.median(total)))


if __name__ == "__main__":
    main()
