#!/usr/bin/env bash
# What a destination replica's experts moving (EPLB) costs the processes
# of a large job (tests/bench/bench_placement.c): Kimi-K2's sample job
# (samples/jobs/kimi-k2-megatron-to-vllm.json: 8 vLLM servers of
# TP16/EP16) with REDUNDANT redundant experts (default 32), replica 3
# moved. Optimized build in WEX_BENCH_BUILD (default build-bench).
#
#   bash tools/bench-placement.sh [REDUNDANT]
set -euo pipefail
cd "$(dirname "$0")/.."
redundant=${1:-32}
build=${WEX_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target \
    bench_placement wex_engine_megatron wex_engine_vllm wex_policy_balanced \
    >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$PWD/samples" "$redundant" >"$tmp/job.json" <<'PY'
import json, sys
samples, redundant = sys.argv[1], int(sys.argv[2])
job = json.load(open(samples + "/jobs/kimi-k2-megatron-to-vllm.json"))
job["model"] = samples + "/models/Kimi-K2-Instruct.config.json"
job["destination"].setdefault("options", {})["redundant_experts"] = redundant
print(json.dumps(job))
PY
"$build/bin/bench_placement" "$tmp/job.json" 3
