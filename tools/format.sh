#!/usr/bin/env bash
# The tree's C, C++ and CUDA sources in the style of .clang-format
# (clang-format 14, Debian's; tools/install-deps.sh installs it).
#   bash tools/format.sh           rewrites every file that differs
#   bash tools/format.sh --check   names every file that differs, exit 1
#                                  if any does (what tools/test-all.sh runs)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
    echo "tools/format.sh: clang-format is not installed (apt-get install clang-format)" >&2
    exit 2
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard \
    '*.c' '*.h' '*.cpp' '*.cu' | sort -u)
if [ "${1:-}" = --check ]; then
    bad=0
    for f in "${files[@]}"; do
        if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
            echo "$f: not formatted (bash tools/format.sh rewrites it)"
            bad=1
        fi
    done
    [ "$bad" -eq 0 ] && echo "format: ${#files[@]} files follow .clang-format"
    exit "$bad"
fi
clang-format -i "${files[@]}"
