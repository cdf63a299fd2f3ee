#!/usr/bin/env bash
# Delta steps against their limits, from one run, in an optimized build
# (build-release/): the encoding of a bf16 region (payload size against
# the region and against an int32 index and a value per changed element;
# encoding against single-thread memcpy; applying against copying the
# region) at several fractions changed.
#   bash tools/bench-delta.sh [MIB [PERCENT...]]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc 2>/dev/null || echo 2)" --target bench_delta >/dev/null
./build-release/bin/bench_delta "$@"
