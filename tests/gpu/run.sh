#!/usr/bin/env bash
# The GPU checks, on a machine with a CUDA device (docs/gpu.md): builds
# Release into build-gpu, runs the GPU tests and the device-to-device
# benchmark, and prints what was and was not exercised. Needs the Debian
# deps (tools/install-deps.sh), CUDA under /usr/local/cuda, and NCCL
# there or from its wheel (pip install nvidia-nccl-cu13).
# Each stage has its own time limit; the whole stays under 8 minutes.
#   bash tests/gpu/run.sh [BUILD_DIR]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
failed=0 t0=$(date +%s)

stage() { # name, time limit (s), command...
    local name=$1 limit=$2 rc
    shift 2
    echo "==== $name"
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    case $rc in
    0) echo "==== $name: ok" ;;
    77) echo "==== $name: skipped" ;;
    124 | 137) echo "==== $name: TIMED OUT after $limit s"; failed=1 ;;
    *) echo "==== $name: FAILED (exit $rc)"; failed=1 ;;
    esac
}

nvidia-smi -L 2>/dev/null || echo "nvidia-smi: no GPU listed"
stage configure 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DWEX_WERROR=ON -DCUDAToolkit_ROOT=/usr/local/cuda
stage build 300 cmake --build "$build" -j"$(nproc)" --target wex_cli gpu_sync \
    test_nccl_transport test_gpu_transport_keys wex_cuda gpu_quantize \
    test_device_quantize gpu_delta gpu_delta_encode
if [ ! -x "$build/bin/gpu_sync" ] || [ ! -x "$build/bin/test_nccl_transport" ]; then
    echo "the GPU tests were not built: is CUDA under /usr/local/cuda, and NCCL there or its wheel installed?"
    exit 1
fi
stage "key codecs and allocation merging" 30 "$build/bin/test_gpu_transport_keys"
stage "cuda-ipc sync between processes on one GPU, every element checked" 150 \
    "$build/bin/gpu_sync" test
stage "nccl transport checks that fit one GPU" 90 "$build/bin/test_nccl_transport"
stage "fp8 kernels against the CPU quantizer, and their speed" 90 \
    "$build/bin/gpu_quantize"
stage "libwex's device quantization (phases, chunks) against the CPU" 60 \
    "$build/bin/test_device_quantize"
stage "the delta kernel against the CPU's apply, and its time beside a whole copy" 90 \
    "$build/bin/gpu_delta"
stage "the delta encoder against the CPU's, and its time beside copies of the tensor" 90 \
    "$build/bin/gpu_delta_encode"
for p in cuda-ipc nccl; do
    stage "wex conformance $p" 60 "$build/bin/wex" conformance --models "$root/samples/models" \
        "$build/lib/wex/plugins/transport-$p.json"
done
stage "benchmark: wex cuda-ipc D2D sync vs cudaMemcpy D2D" 150 "$build/bin/gpu_sync" bench

cat <<'NOTE'
==== exercised: device memory from wex_job_alloc_memory; cuda-ipc between
     processes on GPU 0 (export once per allocation, open, D2D copies, event
     completion, digests read through pinned staging); the nccl transport's
     job-wide communicator joined through connect's exchange (non-blocking),
     refusals, a killed peer failing within
     its timeout (abort, no hang), and a pair of ranks on one GPU; the fp8
     kernels of libwex_cuda.so byte for byte against the CPU quantizer; the
     delta kernels byte for byte against the CPU's apply and encoder.
==== not exercised: an nccl transfer between two GPUs or hosts (one GPU
     cannot hold a two-rank communicator), cuda-ipc across GPUs (peer access).
NOTE
echo "==== total $(($(date +%s) - t0)) s; $([ $failed -eq 0 ] && echo ok || echo FAILED)"
exit $failed
