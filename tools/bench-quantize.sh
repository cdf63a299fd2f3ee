#!/usr/bin/env bash
# The CPU fp8 quantizer (fp8-block-128) against single-thread memcpy, from
# one run, in an optimized build (build-release/).
#   bash tools/bench-quantize.sh [ROWS COLS]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc 2>/dev/null || echo 2)" --target bench_quantize >/dev/null
./build-release/bin/bench_quantize "$@"
