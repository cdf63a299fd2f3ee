#!/usr/bin/env python3
"""Checks the shape of the code base that no compiler checks.

  exports  LIBRARY HEADER     libwex.so defines exactly the functions HEADER
                              declares with WEX_EXPORT: no internal symbol
                              leaks, no public function is missing
  cycles   [--order A,B,..] OBJECT...
                              no two source files depend on each other,
                              directly or round a longer loop: file A
                              depends on file B when A's object uses a
                              symbol B's object defines. With --order (the
                              host's folders, lowest first), a file may
                              only use files of its own folder or of a
                              folder before it
  lengths  --max N DIR...     no .c file under DIR is longer than N lines
  includes --lib DIR [--allow DIR]... [-I DIR]... PATH...
                              no .c or .h file under PATH includes, in
                              quotes, a header that only a folder under
                              --lib holds, unless that folder is allowed:
                              a name is looked up as the compiler would,
                              beside the including file, then in each -I
                              DIR and allowed DIR, before the folders of
                              --lib (the CLI sees host/lib through
                              host/lib/tool only)

Each prints one line per problem and exits 1 when there is any.
"""
import argparse
import os
import re
import subprocess
import sys


def nm(path, *flags):
    out = subprocess.run(["nm", *flags, path], capture_output=True,
                         text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def check_exports(args):
    with open(args.header, encoding="utf-8") as f:
        text = f.read()
    declared = set(re.findall(r"WEX_EXPORT\s+[^;(]*?\b(wex_\w+)\s*\(", text))
    defined = {row[-1] for row in nm(args.library, "-D", "--defined-only")
               if len(row) >= 2}
    problems = []
    for name in sorted(defined - declared):
        problems.append("%s exports %s, which %s does not declare"
                        % (os.path.basename(args.library), name,
                           os.path.basename(args.header)))
    for name in sorted(declared - defined):
        problems.append("%s does not export %s, which %s declares"
                        % (os.path.basename(args.library), name,
                           os.path.basename(args.header)))
    if not declared:
        problems.append("%s: no WEX_EXPORT declarations found" % args.header)
    for p in problems:
        print(p)
    if not problems:
        print("%s exports exactly the %d functions of %s"
              % (os.path.basename(args.library), len(declared),
                 os.path.basename(args.header)))
    return 1 if problems else 0


def file_name(obj):
    """(folder, source file) of an object: .../wex_core.dir/error.c.o."""
    base = os.path.basename(obj)
    source = base[:-2] if base.endswith(".o") else base
    parent = os.path.basename(os.path.dirname(obj))
    folder = parent[:-4] if parent.endswith(".dir") else parent
    if folder.startswith("wex_"):
        folder = folder[4:]
    return folder, source


def strongly_connected(graph):
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    sys.setrecursionlimit(100000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_cycles(args):
    order = args.order.split(",") if args.order else []
    owner, uses, names = {}, {}, {}
    # CMake hands $<TARGET_OBJECTS:...> over as one ;-separated argument
    objects = [o for arg in args.objects for o in arg.split(";") if o]
    for obj in objects:
        name = "%s/%s" % file_name(obj) if order else file_name(obj)[1]
        names[obj] = name
        uses[name] = set()
        for row in nm(obj):
            if len(row) == 2 and row[0] == "U":
                uses[name].add(row[1])
            elif len(row) == 3 and row[1] in "TDBRVWCG":
                owner.setdefault(row[2], name)
    graph = {n: {owner[s] for s in u if s in owner and owner[s] != n}
             for n, u in uses.items()}
    problems = []
    for component in strongly_connected(graph):
        if len(component) > 1:
            problems.append("files depend on each other: " +
                            " <-> ".join(component))
    for a in sorted(graph):
        for b in sorted(graph[a]):
            fa, fb = a.split("/")[0], b.split("/")[0]
            if order and fa != fb and (fa not in order or fb not in order or
                                       order.index(fb) > order.index(fa)):
                problems.append("%s uses %s: folder %s is not below %s"
                                % (a, b, fb, fa))
    for p in problems:
        print(p)
    if not problems:
        print("%d files, %d dependencies between them, no cycle%s"
              % (len(graph), sum(len(v) for v in graph.values()),
                 ", every one pointing down" if order else ""))
    return 1 if problems else 0


def check_lengths(args):
    problems, count = [], 0
    for root in args.dirs:
        for dirpath, _, files in os.walk(root):
            for f in sorted(files):
                if not f.endswith(".c"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    n = sum(1 for _ in fh)
                count += 1
                if n > args.max:
                    problems.append("%s: %d lines (at most %d)"
                                    % (path, n, args.max))
    for p in problems:
        print(p)
    if not problems:
        print("%d .c files, none longer than %d lines" % (count, args.max))
    return 1 if problems else 0


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def sources(paths, suffixes):
    for root in paths:
        if os.path.isfile(root):
            yield root
            continue
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(suffixes):
                    yield os.path.join(dirpath, f)


def check_includes(args):
    lib = os.path.abspath(args.lib)
    allowed = [os.path.abspath(d) for d in args.allow]
    searched = [os.path.abspath(d) for d in args.include] + allowed
    folders = sorted(d for d, _, _ in os.walk(lib)
                     if not any(d == a or d.startswith(a + os.sep)
                                for a in allowed))
    top = os.path.dirname(os.path.commonpath(
        [lib] + [os.path.abspath(p) for p in args.paths]))
    problems, count = [], 0

    def show(path):
        return os.path.relpath(path, top)

    for path in sources(args.paths, (".c", ".h")):
        count += 1
        here = os.path.dirname(os.path.abspath(path))
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if m is None:
                    continue
                name = m.group(1)
                if any(os.path.isfile(os.path.join(d, name))
                       for d in [here] + searched):
                    continue
                holders = [show(d) for d in folders
                           if os.path.isfile(os.path.join(d, name))]
                if holders:
                    problems.append(
                        "%s:%d: includes \"%s\", which only %s holds "
                        "(allowed: %s)" % (show(path), n, name,
                                          ", ".join(holders),
                                          ", ".join(show(a) for a in allowed)
                                          or "none"))
    for p in problems:
        print(p)
    if not problems:
        print("%d files, none includes a header of %s but %s"
              % (count, show(lib),
                 ", ".join(show(a) for a in allowed) or "nothing"))
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("exports")
    p.add_argument("library")
    p.add_argument("header")
    p.set_defaults(run=check_exports)
    p = sub.add_parser("cycles")
    p.add_argument("--order", default="")
    p.add_argument("objects", nargs="+")
    p.set_defaults(run=check_cycles)
    p = sub.add_parser("lengths")
    p.add_argument("--max", type=int, required=True)
    p.add_argument("dirs", nargs="+")
    p.set_defaults(run=check_lengths)
    p = sub.add_parser("includes")
    p.add_argument("--lib", required=True)
    p.add_argument("--allow", action="append", default=[])
    p.add_argument("-I", dest="include", action="append", default=[])
    p.add_argument("paths", nargs="+")
    p.set_defaults(run=check_includes)
    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
