#!/usr/bin/env bash
# Sync benchmark: `wex run` of the default sample with an optimized build,
# several steps, once with verify "none" and once with "digest"; prints
# each step's throughput (destination bytes per second) against this
# machine's single-thread memcpy bandwidth measured in the same run, and
# the two-thread memcpy figure beside it (what two ranks copying at once
# get from this machine's memory). Targets: digests off >= 0.95 x memcpy,
# digests on >= 0.75 x memcpy. memcpy's figure is the best of five passes;
# the `median` line is the step the same kind of statistic fairly meets on
# a shared machine, where a neighbour's burst slows a step or two and the
# mean with them. All figures are printed; the last lines gather them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-5}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for verify in none digest; do
    target=$([ "$verify" = none ] && echo 0.95 || echo 0.75)
    echo "== verify $verify (target: ratio >= $target x one-thread memcpy)"
    "$build/bin/wex" run samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json \
        --verify "$verify" --steps "$steps" | tee "$out"
    awk -v v="$verify" -v t="$target" '
        /^throughput/ {mean = $NF}
        /^median/ {sub(/\)/, "", $NF); median = $NF}
        END {printf "-- verify %s: ratio %s over every step, %s for the median step (target >= %s)\n", v, mean, median, t}' "$out"
done
