#!/usr/bin/env bash
# job.bind(model) over shm from Python (tests/bench/bench_bind.py): a
# 332 MB Qwen3-shaped bf16 model, one trainer process into one engine
# process, verify "none" and "digest", the engine's tensors bound where
# they live (adopt=False) and adopted into wex's shared memory (the
# default over shm); each step's GB/s against one-thread memcpy of the
# same bytes in the same run. Target: adopted, verify none, >= 0.9 x.
# Optimized build in WEX_BENCH_BUILD (default build-bench); the python3 on
# PATH needs torch and transformers.
#
#   bash tools/bench-bind.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-5}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target wex \
    wex_engine_hf wex_policy_balanced wex_transport_shm >/dev/null
PYTHONPATH="$PWD/sdk/python${PYTHONPATH:+:$PYTHONPATH}" \
    WEX_LIBRARY="$PWD/$build/lib/libwex.so" \
    python3 tests/bench/bench_bind.py --steps "$steps"
