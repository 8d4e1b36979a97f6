#!/usr/bin/env python3
"""Where a hand-off's time goes: lines up the bench's hand-off records with a scheduler trace.

Usage: handoff_profile.py TRACE PERF_SCRIPT_OUTPUT

TRACE is the file rlock_bench appends to when RLOCK_BENCH_TRACE is set: one line per hand-off,
"<kind> <ideal|rlock> <unlock_ns> <acquire_ns> <unlocker_tid> <acquirer_tid>" (CLOCK_MONOTONIC).
PERF_SCRIPT_OUTPUT is `perf script` of a `perf sched record -k mono` taken during the same run,
so both use one clock. tests/bench/profile_handoff.sh runs all of it.

For each hand-off it follows the chain of wake-ups that ends in the acquirer returning, walking
back from the acquire: the acquirer's last wake-up before it returned and who woke it (Redis with
the reply, or the client's subscriber thread); if that was the reply, when the acquirer went to
sleep for it and what had woken it before (Redis with the message for a raw waiter reading its
own subscriber connection; the subscriber thread for rlock, which with armed attempts has sent
the attempt by then); and the subscriber thread's own wake-up by the message. Hand-offs are
grouped by that shape ("woken by redis <- subscriber": last wake-up first), and each step is
printed as a median over the group, in microseconds after the unlock returned.
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
    """(shape, {step: us since the unlock returned}) of one hand-off, or None if the trace does
    not show a complete chain. The shape names who woke the acquirer, last wake-up first."""
    unlock, acq, acquirer = rec
    lo = unlock - 2000

    def role(tid):
        return "redis" if "redis" in comm.get(tid, "") else "subscriber"

    seg = {}
    last = ix.wake_before(acquirer, acq)
    if last is None or last[0] < lo:
        return None
    shape = [role(last[1])]
    seg["acquirer woken by %s (last wake-up)" % shape[0]] = last[0]
    run = ix.first_after(ix.runs, acquirer, last[0])
    if run is not None and run <= acq:
        seg["acquirer runs (last)"] = run
    sub = last[1] if shape[0] == "subscriber" else None
    if shape[0] == "redis":
        # It slept waiting for that reply: since when, and what had woken it before.
        slept = ix.last_before(ix.sleeps, acquirer, last[0])
        prev = ix.wake_before(acquirer, slept) if slept is not None else None
        if prev is None or prev[0] < lo:
            return None
        seg["acquirer blocks for the reply"] = slept
        shape.append(role(prev[1]))
        seg["acquirer woken by %s (first wake-up)" % shape[1]] = prev[0]
        run = ix.first_after(ix.runs, acquirer, prev[0])
        if run is not None and run <= slept:
            seg["acquirer runs (first)"] = run
        sub = prev[1] if shape[1] == "subscriber" else None
    if sub is not None:
        woke = seg.get("acquirer woken by subscriber (first wake-up)",
                       seg.get("acquirer woken by subscriber (last wake-up)"))
        sw = ix.wake_before(sub, woke)
        if sw is not None and sw[0] >= lo:
            seg["subscriber thread woken (message)"] = sw[0]
            sr = ix.first_after(ix.runs, sub, sw[0])
            if sr is not None and sr <= woke:
                seg["subscriber thread runs"] = sr
    seg["acquire returns"] = acq
    return " <- ".join(shape), {k: v - unlock for k, v in seg.items()}


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
    for (kind, mode), recs in sorted(groups.items()):
        shapes = defaultdict(list)
        for r in recs:
            c = chain(ix, comm, r)
            if c is not None:
                shapes[c[0]].append(c[1])
        total = [r[1] - r[0] for r in recs]
        print("%s %s: %d hand-offs, median %.1f us; chains found in the trace: %d" %
              (kind, mode, len(recs), statistics.median(total),
               sum(len(v) for v in shapes.values())))
        for shape, chains in sorted(shapes.items(), key=lambda kv: -len(kv[1])):
            if len(chains) < len(recs) / 20:
                continue
            print("  woken by %s: %d hand-offs (%.0f%%)" %
                  (shape, len(chains), 100.0 * len(chains) / len(recs)))
            names = {k for c in chains for k in c}
            steps = sorted(names, key=lambda k: statistics.median(
                [c[k] for c in chains if k in c]))
            print("    %-48s %10s %7s" % ("step (median, us after the unlock returned)",
                                          "us", "n"))
            for k in steps:
                vals = [c[k] for c in chains if k in c]
                print("    %-48s %10.1f %7d" % (k, statistics.median(vals), len(vals)))


if __name__ == "__main__":
    main()
