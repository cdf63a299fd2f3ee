#!/usr/bin/env bash
# Sync benchmark: `wex run` of the default sample with an optimized build,
# several steps, once with verify "none" and once with "digest"; prints
# each step's throughput (destination bytes per second) against this
# machine's single-thread memcpy bandwidth measured in the same run, and
# the two-thread memcpy figure beside it (what two ranks copying at once
# get from this machine's memory). Targets: digests off >= 0.95 x memcpy,
# digests on >= 0.75 x memcpy.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-5}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
for verify in none digest; do
    target=$([ "$verify" = none ] && echo 0.95 || echo 0.75)
    echo "== verify $verify (target: ratio >= $target x one-thread memcpy)"
    "$build/bin/wex" run samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json \
        --verify "$verify" --steps "$steps"
done
