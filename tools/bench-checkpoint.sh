#!/usr/bin/env bash
# Checkpoint benchmark: a Qwen3-0.6B Hugging Face checkpoint (1.2 GB,
# written by wex itself) read into two vLLM TP2 servers' layouts over shm
# with an optimized build. Prints the sync throughput with the checkpoint
# in the page cache against single-thread memcpy measured in the same run
# (target: ratio >= 0.8), and the file-read bandwidth of the same files
# from disk, uncached (O_DIRECT), beside it. The checkpoint is read by one
# hf rank a core (WEX_BENCH_READERS), each mapping all of it.
#   bash tools/bench-checkpoint.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-5}
# Ranks reading the checkpoint: each maps all of it (one page cache), and
# the plan splits the reading between them; one a core by default.
readers=${WEX_BENCH_READERS:-$(nproc 2>/dev/null || echo 2)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
wex="$build/bin/wex"
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/wex-bench-checkpoint.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
model="$PWD/samples/models/Qwen3-0.6B.config.json"
cat >"$tmp/write.json" <<JSON
{"model": "$model", "source": {"engine": "hf"}, "destination": {"engine": "hf"},
 "transport": "shm", "verify": "none"}
JSON
cat >"$tmp/read.json" <<JSON
{"model": "$model", "source": {"engine": "hf", "parallel": {"dp": $readers}},
 "destination": {"engine": "vllm", "parallel": {"tp": 2, "dp": 2}},
 "transport": "shm", "verify": "none"}
JSON
echo "writing the checkpoint (synthetic weights, wex run --save) ..."
"$wex" run "$tmp/write.json" --steps 1 --verify none --save "$tmp/ckpt" >/dev/null
"$wex" check "$tmp/ckpt" --model "$model"
# The files just written are in the page cache: this is the warm read.
"$wex" run "$tmp/read.json" --from-checkpoint "$tmp/ckpt" --steps "$steps" \
    --verify none --json >"$tmp/report.json"
# Uncached: the same files read with O_DIRECT, around the page cache.
cold=$(/usr/bin/python3 - "$tmp/ckpt" <<'PY'
import mmap, os, sys, time
d = sys.argv[1]
buf = mmap.mmap(-1, 16 << 20)
total, start = 0, time.perf_counter()
for name in sorted(os.listdir(d)):
    if not name.endswith(".safetensors"):
        continue
    fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_DIRECT)
    while True:
        n = os.readv(fd, [buf])
        total += n
        if n < len(buf):
            break
    os.close(fd)
print("%.2f" % (total / (time.perf_counter() - start) / 1e9))
PY
) || cold="unavailable (no O_DIRECT on this file system)"
/usr/bin/python3 - "$tmp/report.json" "$cold" "$readers" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steps = r["steps"]
steady = r.get("steady_gb_per_s") or r["gb_per_s"]
print("checkpoint Qwen3-0.6B (%d bytes a step), read by %s hf ranks -> vllm tp2 x dp2 over shm, %d steps"
      % (steps[0]["bytes"], sys.argv[3], len(steps)))
print("page cache   %.2f GB/s (steady %.2f); memcpy one thread %.2f GB/s; "
      "ratio %.2f (steady %.2f; target >= 0.8)"
      % (r["gb_per_s"], steady, r["memcpy_gb_per_s"],
         r["gb_per_s"] / r["memcpy_gb_per_s"], steady / r["memcpy_gb_per_s"]))
print("from disk    %s GB/s: the files read uncached (O_DIRECT), same run" % sys.argv[2])
assert r["verified"], "every destination element matches the checkpoint"
PY
