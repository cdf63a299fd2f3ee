#!/usr/bin/env bash
# Planner benchmark: plans every sample job with an optimized build and
# prints, per job, the predicted step time against the lower bound the
# cost model computes from the layouts, and the planner's own costs
# against their targets (every rank < 2 s, one rank < 100 ms, < 2 GB).
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
print(f"  plan every rank {p['plan_seconds']:.3f} s (target < 2 s) after {p['layout_seconds']:.3f} s of layouts; "
      f"destination rank 0 alone {r['plan_seconds']*1000:.1f} ms (target < 100 ms); peak RSS {kb/1024:.0f} MB (target < 2048 MB)")
PY
done
