#!/usr/bin/env bash
# Sync benchmark: `wex run` of the default sample with an optimized build
# and verify "none", several steps; prints each step's throughput
# (destination bytes per second) against this machine's single-thread
# memcpy bandwidth measured in the same run (target: ratio >= 0.95), and
# the two-thread memcpy figure beside it (what two ranks copying at once
# get from this machine's memory).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-5}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
"$build/bin/wex" run samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json \
    --verify none --steps "$steps"
