#!/usr/bin/env bash
# Planner benchmark: plans every sample job with an optimized build and
# prints, per job, the predicted step time against the lower bound the
# cost model computes from the layouts, and the planner's own costs
# against their targets (every rank < 1 s, < 2 GB); then it writes every
# rank's plan share and times wex_job_open on destination rank 0 and
# source rank 0 from their shares (target < 100 ms: ready to replay its
# plan, the transport's context included) and without;
# then how the planner's cost grows with the rank count, on a 10T-parameter
# DeepSeek-family config, from 64 x 32 to 1,024 x 512 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
wex="$build/bin/wex"
for job in samples/jobs/*.json; do
    /usr/bin/time -f '%M' -o "$build/rss.txt" "$wex" plan "$job" --json >"$build/plan.json"
    "$wex" plan "$job" --json --rank 0 >"$build/rank.json"
    /usr/bin/python3 - "$job" "$build/plan.json" "$build/rank.json" "$build/rss.txt" <<'PY'
import json, sys
job, plan, rank, rss = sys.argv[1:]
p = json.load(open(plan)); r = json.load(open(rank))
kb = int(open(rss).read().split()[-1])
print(f"{job}")
print(f"  {p['source_engine']} x{p['source_ranks']} -> {p['destination_engine']} x{p['destination_ranks']}: "
      f"{p['operations']} ops, {p['bytes']/1e9:.1f} GB (needed {p['bytes_needed']/1e9:.1f} GB, redundant {p['redundant_bytes']})")
ratio = p['predicted_seconds'] / p['lower_bound_seconds'] if p['lower_bound_seconds'] else float('nan')
print(f"  predicted {p['predicted_seconds']:.4f} s / lower bound {p['lower_bound_seconds']:.4f} s = {ratio:.4f} (target <= 1.05)")
if p.get("quantized_bytes"):
    print(f"  sources read {p['source_bytes']/1e9:.1f} GB, {p['quantized_bytes']/1e9:.1f} GB of it quantized to fp8 "
          f"at {p['quantize_gb_per_s']:.0f} GB/s a source; the wire carries {p['bytes']/1e9:.1f} GB")
if "kimi-k2" in job:
    print(f"  Perplexity reports 1.3 s for this shape (bf16 Megatron 256 GPUs -> FP8 vLLM 128 GPUs); "
          f"wex predicts {p['predicted_seconds']:.2f} s")
print(f"  plan every rank {p['plan_seconds']:.3f} s (target < 1 s) after {p['layout_seconds']:.3f} s of layouts; peak RSS {kb/1024:.0f} MB (target < 2048 MB)")
print(f"  destination rank 0 planning for itself: {r['layout_seconds']*1000:.0f} ms of layouts of every rank, "
      f"then {r['plan_seconds']*1000:.1f} ms of its own plan")
PY
    shares="$build/shares"
    rm -rf "$shares"
    "$wex" plan "$job" --json --shares "$shares" 2>"$build/shares.txt" >/dev/null
    sed 's/^shares  */  plan shares: /' "$build/shares.txt"
    open="$build/bin/bench_job_open"
    dst=$(WEX_PLAN_SHARES="$shares" "$open" "$job" destination 0 5)
    src=$(WEX_PLAN_SHARES="$shares" "$open" "$job" source 0 5)
    cold=$(WEX_PLAN_SHARES='' "$open" "$job" destination 0 1)
    echo "  ready (wex_job_open to a plan it can replay, median of 5): destination rank 0 in" \
         "$(echo "$dst" | awk '{print $5}') ms from its share (target < 100 ms)," \
         "source rank 0 in $(echo "$src" | awk '{print $5}') ms; without a share" \
         "$(echo "$cold" | awk '{print $5}') ms"
done

# How cost grows: Megatron (tp 8, ep over the whole tp x dp group) into
# vLLM servers (tp 8, internal DP, ep over tp x dp) of half as many ranks,
# on samples/models/synthetic/DeepSeek-10T.config.json (10.2T parameters).
scale="$build/scale"
mkdir -p "$scale"
echo "plan cost against ranks: DeepSeek-10T, Megatron -> vLLM (bf16), every rank of both sides"
for n in 64 128 256 512 1024; do
    /usr/bin/python3 - "$n" "$PWD/samples/models/synthetic/DeepSeek-10T.config.json" "$scale/$n.json" <<'PY'
import json, sys
n, model, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pp = 8 if n <= 256 else 16
dp = n // (8 * pp)
m = n // 2
json.dump({"name": f"DeepSeek-10T {n} x {m}", "model": model,
           "source": {"engine": "megatron", "options": {"dtype": "bf16"},
                      "parallel": {"tp": 8, "pp": pp, "dp": dp, "ep": 8 * dp, "etp": 1}},
           "destination": {"engine": "vllm", "options": {"dtype": "bf16"},
                           "parallel": {"tp": 8, "dp": m // 8, "ep": m}},
           "transport": "ucx",
           "topology": {"placement": "disaggregated", "gpus_per_host": 8,
                        "nic_gb_per_s": 50, "intra_host_gb_per_s": 400}},
          open(out, "w"))
PY
    /usr/bin/time -f '%M' -o "$scale/rss.txt" "$wex" plan "$scale/$n.json" --json >"$scale/plan.json"
    /usr/bin/python3 - "$n" "$scale/plan.json" "$scale/rss.txt" <<'PY'
import json, sys
n, plan, rss = int(sys.argv[1]), sys.argv[2], sys.argv[3]
p = json.load(open(plan))
kb = int(open(rss).read().split()[-1])
target = " (target < 10 s)" if n == 1024 else ""
print(f"  {p['source_ranks']:5d} x {p['destination_ranks']:4d} ranks: {p['operations']:8d} ops, "
      f"layouts {p['layout_seconds']:6.2f} s, plan every rank {p['plan_seconds']:6.2f} s{target}, "
      f"{p['plan_seconds'] / (p['source_ranks'] + p['destination_ranks']) * 1000:6.2f} ms a rank, "
      f"peak RSS {kb / 1024:5.0f} MB")
PY
done
