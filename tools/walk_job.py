#!/usr/bin/env python3
"""How far one call spreads the job: a walk of `wex_job` through the host.

Starting at a function (wex__job_sync by default), follows every call to
a host function that takes the job (a `wex_job *` parameter), depth
first, each function expanded once, in the order the calls appear. Each
call followed is a stop; a stop in a file the walk had left before is a
return. Prints the stops, the files they are in, and the returns:

  python3 tools/walk_job.py [--from FUNCTION] [--list] [DIR...]

Lexical, not a compiler: function definitions start at the beginning of
a line and their bodies end at a "}" there, as the tree is written.
"""
import argparse
import os
import re
import sys

DEFINITION = re.compile(
    r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b(\w+)\s*\(([^;{]*?)\)\s*\{",
    re.M | re.S)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def functions(roots):
    """{name: (file, takes_job, body)} of every function defined."""
    found = {}
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for m in DEFINITION.finditer(text):
                    end = text.find("\n}", m.end())
                    body = text[m.end():end if end >= 0 else len(text)]
                    takes = re.search(r"\bwex_job\s*\*", m.group(2)) is not None
                    found.setdefault(m.group(1), (path, takes, body))
    return found


def walk(found, start):
    stops, seen = [], set()

    def visit(name):
        seen.add(name)
        for call in CALL.finditer(found[name][2]):
            callee = call.group(1)
            if callee == name or callee not in found or not found[callee][1]:
                continue
            stops.append(callee)
            if callee not in seen:
                visit(callee)

    visit(start)
    return stops


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="start", default="wex__job_sync")
    p.add_argument("--list", action="store_true", help="print every stop")
    p.add_argument("dirs", nargs="*", default=["host/lib"])
    args = p.parse_args()
    found = functions(args.dirs)
    if args.start not in found:
        sys.exit("%s: not defined under %s" % (args.start, " ".join(args.dirs)))
    stops = walk(found, args.start)
    left, returns, last = set(), 0, found[args.start][0]
    for s in stops:
        path = found[s][0]
        if path != last:
            left.add(last)
            returns += path in left
            last = path
        if args.list:
            print("%-40s %s" % (s, os.path.relpath(path)))
    files = {found[s][0] for s in stops} | {found[args.start][0]}
    print("%s: %d stops in %d files, %d of them returns to a file already "
          "left" % (args.start, len(stops), len(files), returns))


if __name__ == "__main__":
    main()
