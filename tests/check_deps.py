#!/usr/bin/env python3
"""Checks the library's dependency graph between source files for cycles.

Usage: check_deps.py OBJDIR ALLOWED

OBJDIR holds the library's object files (one per src/<layer>/*.c, searched recursively). An edge
a -> b means a.c.o uses a symbol that b.c.o defines (read with `nm`), so the graph is what the
code calls, not what it includes. Every cycle is reported unless each of its edges is listed in
ALLOWED, a text file of lines "a.c -> b.c  # why" (docs/architecture.md defends each one).
Generated code is left out. Prints the graph, one line per file, then "deps: N passed, N failed"
(cycles found) and exits non-zero on an undefended cycle.
"""
import os
import subprocess
import sys


def symbols(path):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3
               and line.split()[1] in "TDBRC"}
    out = subprocess.run(["nm", "--undefined-only", path], capture_output=True, text=True,
                         check=True).stdout
    used = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, used


def graph(objdir):
    files = sorted((f, os.path.join(d, f)) for d, _, names in os.walk(objdir) for f in names
                   if f.endswith(".c.o"))
    info = {f[:-2]: symbols(path) for f, path in files}
    owner = {}
    for name, (defined, _) in info.items():
        for s in defined:
            owner[s] = name
    edges = {name: set() for name in info}
    for name, (_, used) in info.items():
        for s in used:
            if s in owner and owner[s] != name:
                edges[name].add(owner[s])
    return edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    objdir, allowed_path = sys.argv[1], sys.argv[2]
    allowed = set()
    with open(allowed_path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            # "include a -> b" lines are check_includes.py's.
            if line and not line.startswith("include "):
                a, b = (x.strip() for x in line.split("->"))
                allowed.add((a, b))
    edges = graph(objdir)
    edges = {k: v for k, v in edges.items() if not k.startswith("rlock_scripts_gen")}
    for k in edges:
        edges[k] = {w for w in edges[k] if w in edges}
    for v in sorted(edges):
        print(f"{v} -> {', '.join(sorted(edges[v])) or '(nothing)'}")
    # Only edges that are not defended can make a cycle that fails the check.
    checked = {v: {w for w in ws if (v, w) not in allowed} for v, ws in edges.items()}
    bad = cycles(checked)
    for comp in bad:
        inner = [f"{v} -> {w}" for v in comp for w in sorted(checked[v]) if w in comp]
        print("cycle: " + "; ".join(inner))
    defended = cycles(edges)
    for comp in defended:
        if comp not in bad:
            print("defended cycle (docs/architecture.md): " + ", ".join(comp))
    print(f"deps: {1 if not bad else 0} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
