#!/usr/bin/env python3
"""The longest functions of C++ files, in lines from signature to closing brace.

Issue 35 bounds the CUDA printer's largest function at 200 lines
(docs/design.md, "Issue 35 checklist"); this is how that is measured:

    scripts/function-lengths.py lib/Target/CUDA/*.cpp

Start and end lines come from Universal Ctags (`ctags --fields=+ne`), which
parses C++ well enough for function extents; lambdas are counted inside the
function that holds them, not on their own. Exits 1 with --max N when a
function is longer than N lines, 2 when ctags is missing or fails.
"""
import argparse
import json
import shutil
import subprocess
import sys


def functions(path):
    out = subprocess.run(
        ["ctags", "--output-format=json", "--c++-kinds=f", "--fields=+ne",
         "--language-force=C++", "-o", "-", path],
        capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("kind") != "function" or "end" not in tag:
            continue
        if tag["name"].startswith("__anon"):  # a lambda
            continue
        yield tag["end"] - tag["line"] + 1, path, tag["line"], tag["name"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=5, help="rows to print")
    ap.add_argument("--max", type=int, help="fail above this many lines")
    args = ap.parse_args()
    if not shutil.which("ctags"):
        print("function-lengths: ctags (Universal Ctags) not found",
              file=sys.stderr)
        return 2
    try:
        rows = sorted((r for f in args.files for r in functions(f)),
                      reverse=True)
    except (subprocess.CalledProcessError, json.JSONDecodeError) as e:
        print("function-lengths: ctags failed: %s" % e, file=sys.stderr)
        return 2
    for length, path, line, name in rows[:args.top]:
        print("%5d  %s:%d %s" % (length, path, line, name))
    if args.max is not None and rows and rows[0][0] > args.max:
        print("function-lengths: %s:%d %s has %d lines (> %d)"
              % (rows[0][1], rows[0][2], rows[0][3], rows[0][0], args.max),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
