#!/usr/bin/env bash
# Installs what wex needs to build and test on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config \
    libcjson-dev check libsubunit-dev \
    libucx-dev ucx-utils libxxhash-dev \
    python3 python3-jsonschema iproute2 \
    clang libclang-rt-14-dev clang-format >/dev/null
# The Python package and its tests (tests/python, samples/python), for the
# python3 first on PATH. torch is pinned to the CPU wheel this machine
# carries: an unpinned torch would download a CUDA build of several GB.
# transformers 4.x: its model classes' parameter names are the checkpoints'
# (5.x fuses MoE experts; see docs/python.md). mypy checks the package's
# type hints. ray runs samples/python/ray_loop.py (trainer and engines as
# Ray actors), pinned so a new release cannot change what it tests.
# megatron-core builds real Megatron models on CPU (gloo, the local spec)
# for tests/python/test_megatron_core.py's goldens.
python3 -m pip install -q --disable-pip-version-check \
    "torch==2.13.0" "transformers==4.57.6" safetensors numpy pytest \
    "scikit-build-core>=0.10" mypy "ray==2.60.0" "megatron-core==0.16.1"
# NCCL for the nccl transport: beside the CUDA toolkit when it is there,
# else NCCL's wheel, which CMake finds through this python3 (docs/gpu.md).
# Without a GPU the plugin still builds, loads and passes the conformance
# checks that need no device, and its key codec's tests run.
if [ -d /usr/local/cuda ] && ! ls /usr/local/cuda/lib64/libnccl.so* \
        /usr/local/cuda/targets/*/lib/libnccl.so* >/dev/null 2>&1; then
    python3 -m pip install -q --disable-pip-version-check nvidia-nccl-cu13
fi
echo "dependencies installed"
