#!/usr/bin/env python3
"""Run ctest under LeakSanitizer, rerunning once a test that only LSan's
own tracer broke.

LeakSanitizer stops the world at every process exit with a ptrace tracer,
and that tracer now and then segfaults by itself ("Tracer caught signal
11", google/sanitizers#1353): no leak is reported, the exit status turns
1, the test fails.  The suite forks a process per Check test and per
worker, thousands of exits a run, so the flake reddens whole runs.

A failed test is rerun exactly once, and only when its output carries the
tracer crash and no sanitizer report of its own: a real leak, an ASan or
UBSan error, an assertion failure without the crash, or a second tracer
crash all stay failures.

usage: tools/ctest-lsan-retry.py BUILD_DIR [ctest arguments...]
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

TRACER_CRASH = ("Tracer caught signal 11",
                "LeakSanitizer has encountered a fatal error")
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "runtime error:", "SUMMARY: AddressSanitizer",
                     "SUMMARY: UndefinedBehaviorSanitizer")


def only_tracer_crashed(output):
    if not all(s in output for s in TRACER_CRASH):
        return False
    return not any(s in output for s in SANITIZER_REPORTS)


def failed_tests(junit_path):
    tree = ET.parse(junit_path)
    for case in tree.iter("testcase"):
        if case.get("status") != "fail" and case.find("failure") is None:
            continue
        out = case.findtext("system-out") or ""
        yield case.get("name"), out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    build, args = sys.argv[1], sys.argv[2:]
    junit = os.path.join(os.path.abspath(build), "Testing", "lsan-retry.xml")
    first = subprocess.run(["ctest", "--test-dir", build,
                            "--output-on-failure", "--output-junit", junit]
                           + args)
    if first.returncode == 0:
        return 0
    try:
        failed = list(failed_tests(junit))
    except (OSError, ET.ParseError) as e:
        print(f"ctest-lsan-retry: {junit}: {e}; not retrying",
              file=sys.stderr)
        return first.returncode
    if not failed:
        return first.returncode
    flaky = [name for name, out in failed if only_tracer_crashed(out)]
    real = [name for name, out in failed if name not in flaky]
    if real or not flaky:
        print("ctest-lsan-retry: failed for real: " + ", ".join(real or
              [n for n, _ in failed]), file=sys.stderr)
        return first.returncode
    print("ctest-lsan-retry: LeakSanitizer's tracer crashed at an exit "
          "(google/sanitizers#1353) in " + ", ".join(flaky) +
          " with no sanitizer report; rerunning once", file=sys.stderr)
    pattern = "^(" + "|".join(re.escape(n) for n in flaky) + ")$"
    second = subprocess.run(["ctest", "--test-dir", build,
                             "--output-on-failure", "-R", pattern] + args)
    return second.returncode


if __name__ == "__main__":
    sys.exit(main())
