#!/usr/bin/env bash
# Builds wex and runs the main job on its embedded defaults. Until the
# sync runtime lands, the main job is: list the in-tree plugins, then lay
# a real model (Qwen3-8B's config.json) out with the hf engine.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
echo "$ wex plugins"
./build/bin/wex plugins
echo
echo "$ wex layout --model samples/models/Qwen3-8B.config.json --engine hf"
./build/bin/wex layout --model samples/models/Qwen3-8B.config.json --engine hf
