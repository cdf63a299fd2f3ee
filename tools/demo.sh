#!/usr/bin/env bash
# Builds wex and runs the main job on its defaults: Qwen3-0.6B trained by
# Megatron (TP2 x PP2) synced into two vLLM TP2 servers on this machine,
# every rank its own process, over shared memory, verified element by
# element. Then plans the larger sample jobs, Kimi-K2 (1T parameters,
# Megatron on 256 GPUs into vLLM on 128) last.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
run() {
    echo "\$ $*"
    "$@"
    echo
}
run ./build/bin/wex run samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json
for job in samples/jobs/qwen3-30b-a3b-fsdp-to-sglang.json \
           samples/jobs/kimi-k2-megatron-to-vllm.json; do
    run ./build/bin/wex plan "$job"
done
