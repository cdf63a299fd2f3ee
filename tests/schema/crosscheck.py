#!/usr/bin/python3
"""Cross-check wex's C JSON Schema validator against python-jsonschema.

Usage: crosscheck.py --driver PATH_TO_SCHEMA_DRIVER --corpus DIR

Every subdirectory of DIR is one case: schema.json, doc.json and a file
`expected` holding one verdict:
  valid      the document satisfies the schema
  invalid    it does not
  malformed  the schema itself is unusable, so neither side validates:
             python's check_schema raises SchemaError, or resolving a $ref
             fails (RefResolutionError) or never ends (RecursionError); the
             C driver exits 2 and prints a "schema:..." error line.

The reference is jsonschema.Draft202012Validator (python3-jsonschema 4.10),
whose semantics the C side follows: keywords next to $ref apply, "integer"
accepts 1.0, true is not 1. For each case the python verdict must equal
`expected` and the C driver's verdict must equal python's. Prints one line per
disagreement and ends with "N passed, M failed"; exits 0 only if all agree.
"""

import argparse
import json
import os
import subprocess
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import RefResolutionError, SchemaError

VERDICTS = ("valid", "invalid", "malformed")


def python_verdict(schema, doc):
    try:
        Draft202012Validator.check_schema(schema)
        errors = list(Draft202012Validator(schema).iter_errors(doc))
    except (SchemaError, RefResolutionError, RecursionError):
        return "malformed"
    return "invalid" if errors else "valid"


def c_verdict(driver, case_dir):
    """The driver's verdict, or a description of what went wrong."""
    try:
        proc = subprocess.run(
            [driver, os.path.join(case_dir, "schema.json"),
             os.path.join(case_dir, "doc.json")],
            capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "timeout"
    lines = proc.stdout.splitlines()
    if proc.returncode == 0 and lines == ["valid"] and not proc.stderr:
        return "valid"
    if proc.returncode == 1 and lines and not proc.stderr and \
            all(": " in line for line in lines):
        return "invalid"
    if proc.returncode == 2 and len(lines) == 1 and \
            lines[0].startswith("schema:") and not proc.stderr:
        return "malformed"
    detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return "exit %d (%s)" % (proc.returncode, detail[0] if detail else "")


def check_case(driver, case_dir):
    """None when everything agrees, else a one-line explanation."""
    try:
        with open(os.path.join(case_dir, "expected"), encoding="utf-8") as f:
            expected = f.read().strip()
        with open(os.path.join(case_dir, "schema.json"), encoding="utf-8") as f:
            schema = json.load(f)
        with open(os.path.join(case_dir, "doc.json"), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return "unreadable case: %s" % e
    if expected not in VERDICTS:
        return "bad expected verdict %r" % expected
    py = python_verdict(schema, doc)
    c = c_verdict(driver, case_dir)
    if py != expected or c != py:
        return "expected %s, python says %s, C says %s" % (expected, py, c)
    return None


DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def check_project_schema(path):
    """None when one of wex's own schemas declares draft 2020-12 (the draft
    the C validator implements) and python-jsonschema accepts it as such."""
    try:
        with open(path, encoding="utf-8") as f:
            schema = json.load(f)
    except (OSError, ValueError) as e:
        return "unreadable: %s" % e
    if schema.get("$schema") != DRAFT_2020_12:
        return "declares %r, expected %r" % (schema.get("$schema"), DRAFT_2020_12)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        return "not a valid 2020-12 schema: %s" % e.message
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--schemas", help="also check every *.schema.json here "
                        "declares and is valid draft 2020-12")
    args = parser.parse_args()

    cases = sorted(entry.name for entry in os.scandir(args.corpus)
                   if entry.is_dir())
    passed = failed = 0
    for name in cases:
        problem = check_case(args.driver, os.path.join(args.corpus, name))
        if problem:
            print("%s: %s" % (name, problem))
            failed += 1
        else:
            passed += 1
    if not cases:
        print("%s: no cases found" % args.corpus)
        failed += 1
    if args.schemas:
        names = sorted(n for n in os.listdir(args.schemas)
                       if n.endswith(".schema.json"))
        if not names:
            print("%s: no schemas found" % args.schemas)
            failed += 1
        for name in names:
            problem = check_project_schema(os.path.join(args.schemas, name))
            if problem:
                print("%s: %s" % (name, problem))
                failed += 1
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
