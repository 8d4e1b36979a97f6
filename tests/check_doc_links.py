#!/usr/bin/env python3
"""check_doc_links.py SOURCE_DIR

README.md as the front door: at most 250 lines, opening with the two commands (examples/demo.sh,
then tests/run.sh) before any section, and every relative link in README.md and docs/**/*.md pointing
at a file that exists and, with a #fragment, at a heading of that file (GitHub's anchors). Prints
one line per problem and "check_doc_links: OK" when there is none. Used by the test docs_links.
"""
import pathlib
import re
import sys

MAX_README_LINES = 250
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def prose_lines(text):
    """The lines outside fenced code blocks, with inline code removed: links there are not links."""
    fence = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m is None:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def check_links(src, page, problems):
    for line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto: are not checked offline
            file_part, _, fragment = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            where = page.relative_to(src)
            if not dest.exists():
                problems.append(f"{where}: link to missing file {target}")
            elif fragment and (dest.suffix != ".md" or fragment not in anchors(dest)):
                problems.append(f"{where}: link to missing anchor {target}")


def check_readme(readme, problems):
    lines = readme.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_README_LINES:
        problems.append(f"README.md: {len(lines)} lines, at most {MAX_README_LINES}")
    commands = []
    fence = False
    for line in lines:
        if line.startswith("## "):
            break
        if line.startswith("```"):
            if fence:
                break
            fence = True
        elif fence and line.strip():
            commands.append(line.split()[0])
    if commands[:2] != ["examples/demo.sh", "tests/run.sh"]:
        problems.append("README.md: does not open with examples/demo.sh and tests/run.sh "
                        f"before its first section (found {commands[:2]})")


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    readme = src / "README.md"
    check_readme(readme, problems)
    for page in [readme] + sorted((src / "docs").rglob("*.md")):
        check_links(src, page, problems)
    for p in problems:
        print(f"check_doc_links: {p}")
    if not problems:
        print("check_doc_links: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
