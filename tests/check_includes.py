#!/usr/bin/env python3
"""Checks that every #include "x.h" points down the layers, never up or sideways.

Usage: check_includes.py ROOT ALLOWED LAYERS...

LAYERS are folders under ROOT, bottom first; "a|b" puts two folders side by side on one rank
(neither may include the other). A file may include headers of its own folder and of folders of
a lower rank; a header found in no layer folder (rlock.h, generated code, system headers) is not
checked. Every other include is a back edge and fails the check, unless ALLOWED lists it as a
line "include FILE -> HEADER  # why" (FILE relative to ROOT); at most two such lines are allowed.
Prints each back edge, then "includes: N passed, N failed" counting files, and exits non-zero
when a file has an undefended back edge.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAX_ALLOWED = 2


def read_allowed(path):
    pairs = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include "):
                a, b = (x.strip() for x in line[len("include "):].split("->"))
                pairs.add((a, b))
    return pairs


def layer_files(root, layers):
    """{folder: rank} and [(relative path, folder)] of every .c/.h file in the layer folders."""
    rank, files = {}, []
    for i, spec in enumerate(layers):
        for folder in spec.split("|"):
            rank[folder] = i
            for name in sorted(os.listdir(os.path.join(root, folder))):
                if name.endswith((".c", ".h")):
                    files.append((f"{folder}/{name}", folder))
    return rank, files


def main():
    root, allowed_path, layers = sys.argv[1], sys.argv[2], sys.argv[3:]
    allowed = read_allowed(allowed_path)
    if len(allowed) > MAX_ALLOWED:
        print(f"includes: {len(allowed)} exceptions in {allowed_path}, at most {MAX_ALLOWED}")
        return 1
    rank, files = layer_files(root, layers)
    home = {os.path.basename(path): folder for path, folder in files if path.endswith(".h")}
    failed = 0
    for path, folder in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            includes = INCLUDE.findall(f.read())
        bad = False
        for header in includes:
            to = home.get(header)
            if to is None or to == folder or rank[to] < rank[folder]:
                continue
            where = "beside" if rank[to] == rank[folder] else "above"
            defended = (path, header) in allowed
            print(f"{'defended ' if defended else ''}back edge: {path} -> {header} "
                  f"({to} is {where} {folder})")
            bad = bad or not defended
        failed += bad
    print(f"includes: {len(files) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
