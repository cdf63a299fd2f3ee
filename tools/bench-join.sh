#!/usr/bin/env bash
# How long a replica joining a running job takes to be ready, open to
# first commit (tests/bench/bench_join.c): an hf source into two vLLM TP2
# replicas of MODEL (default Qwen3-0.6B, real size) over TRANSPORT
# (default shm), replica 1 joining at step 2; seeded by the sources and
# from replica 0 ("seed": "replicas"), each without and with the joiners'
# plan shares (wex plan --shares). Optimized build in WEX_BENCH_BUILD
# (default build-bench).
#
#   bash tools/bench-join.sh [MODEL.config.json] [TRANSPORT]
set -euo pipefail
cd "$(dirname "$0")/.."
model=$(realpath "${1:-samples/models/Qwen3-0.6B.config.json}")
transport=${2:-shm}
build=${WEX_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target bench_join \
    wex_cli wex_engine_hf wex_engine_vllm wex_policy_balanced \
    wex_transport_shm wex_transport_ucx >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
warm=1
for seed in sources replicas; do
    cat >"$tmp/$seed.json" <<EOF2
{"model": "$model", "source": {"engine": "hf"},
 "destination": {"engine": "vllm", "parallel": {"tp": 2, "dp": 2},
                 "elastic": {"min_replicas": 1, "seed": "$seed"}},
 "transport": "$transport", "verify": "digest",
 "timeouts": {"connect_seconds": 120, "step_seconds": 120}}
EOF2
    if [ "$warm" = 1 ]; then
        # The first run after a while pays the kernel's zeroing of every
        # page the ranks take (2-3 s more here): not counted.
        "$build/bin/bench_join" "$build/bin/wex" "$tmp/$seed.json" >/dev/null
        warm=0
    fi
    for share in no yes; do
        echo "== seed $seed, plan share: $share ($(basename "$model"), $transport)"
        if [ "$share" = yes ]; then
            rm -rf "$tmp/shares"
            "$build/bin/wex" plan "$tmp/$seed.json" --shares "$tmp/shares" >/dev/null
            WEX_PLAN_SHARES="$tmp/shares" "$build/bin/bench_join" "$build/bin/wex" "$tmp/$seed.json"
        else
            env -u WEX_PLAN_SHARES "$build/bin/bench_join" "$build/bin/wex" "$tmp/$seed.json"
        fi
    done
done
