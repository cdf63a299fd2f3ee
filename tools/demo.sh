#!/usr/bin/env bash
# Builds wex and runs the main job on its embedded defaults. Until the
# sync runtime lands, the main job is: list the in-tree plugins, lay
# Qwen3-8B out as vLLM holds it with TP 4, then plan the sample jobs,
# Kimi-K2 (1T parameters, Megatron on 256 GPUs into vLLM on 128) last.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
run() {
    echo "\$ $*"
    "$@"
    echo
}
run ./build/bin/wex plugins
run ./build/bin/wex layout --model samples/models/Qwen3-8B.config.json --engine vllm --parallel tp=4
for job in samples/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json \
           samples/jobs/qwen3-30b-a3b-fsdp-to-sglang.json \
           samples/jobs/kimi-k2-megatron-to-vllm.json; do
    run ./build/bin/wex plan "$job"
done
