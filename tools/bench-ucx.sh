#!/usr/bin/env bash
# UCX benchmark on one host over loopback: wex's `ucx` sync throughput for
# the default sample (Qwen3-0.6B Megatron TP2 PP2 -> vLLM TP2 x 2, every
# rank a process, verify none) against ucx_perftest's UCP put bandwidth at
# the plan's mean operation size, measured in the same run. With UCX_TLS=tcp
# wex sends active messages (tcp has no native RMA), so the limit is
# ucx_perftest's ucp_am_bw (target: ratio >= 0.9; ucp_put_bw, UCX's puts
# emulated over tcp, is printed beside it). With UCX's default selection
# and error_handling none (shared memory) the limit is ucp_put_bw, and
# single-thread memcpy beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${WEX_BENCH_BUILD:-build-bench}
steps=${1:-3}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
wex="$build/bin/wex"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=samples/jobs/qwen3-0.6b-megatron-to-vllm-disaggregated.json
size=$("$wex" plan "$job" --json | /usr/bin/python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["bytes"] // p["operations"])')
iters=$(( (1 << 30) / size + 20 ))
export UCX_LOG_LEVEL=error UCX_WARN_UNUSED_ENV_VARS=n
perftest() { # TEST SIZE ITERS: prints MB/s of that UCP bandwidth test
    local port=$((20000 + RANDOM % 20000))
    ucx_perftest -t "$1" -s "$2" -n "$3" -p "$port" >"$tmp/server.txt" 2>&1 &
    local server=$!
    sleep 1
    ucx_perftest 127.0.0.1 -t "$1" -s "$2" -n "$3" -p "$port" 2>/dev/null |
        awk '/^Final:/ {print $7}'
    wait "$server" 2>/dev/null || true
}
wexrun() { # job -> "GB/s over every step" "GB/s over the steps after the first"
    "$wex" run "$1" --verify none --steps "$steps" --json | /usr/bin/python3 -c \
        'import json,sys; r=json.load(sys.stdin); assert r["verified"], r["errors"]; print(r["gb_per_s"], r.get("steady_gb_per_s", 0))'
}
# UCX's default selection drops shared memory when peer-failure handling is
# on; this job variant turns it off so both sides may use what UCX picks.
sed -e 's|"../models/|"'"$PWD"'/samples/models/|' \
    -e 's|"transport": "ucx"|"transport": {"name": "ucx", "options": {"error_handling": "none"}}|' \
    "$job" >"$tmp/nohandling.json"
echo "mean operation size of the plan: $size bytes"
gbps() { /usr/bin/python3 -c "print('%.3f' % (float('$1') / 1000))"; }
for tls in tcp default; do
    if [ "$tls" = default ]; then unset UCX_TLS; j="$tmp/nohandling.json"; else export UCX_TLS=tcp; j=$job; fi
    put=$(perftest ucp_put_bw "$size" "$iters")
    am=$(perftest ucp_am_bw "$size" "$iters")
    # ucx_perftest sends one buffer over and over: at ~1 MB it stays in
    # cache. A 256 MiB message shows what the same path does from DRAM,
    # which is where a sync's bytes come from.
    big=$(perftest ucp_put_bw $((256 << 20)) 8)
    bigam=$(perftest ucp_am_bw $((256 << 20)) 8)
    echo "UCX_TLS=$tls ucx_perftest at 256 MiB: ucp_put_bw $(gbps "$big") GB/s, ucp_am_bw $(gbps "$bigam") GB/s"
    read -r w steady < <(wexrun "$j")
    if [ "$tls" = tcp ]; then limit=$am name=ucp_am_bw other="ucp_put_bw $(gbps "$put") GB/s" dram=$bigam
    else limit=$put name=ucp_put_bw other="ucp_am_bw $(gbps "$am") GB/s" dram=$big; fi
    # perftest at the mean size sends one cache-resident buffer over and
    # over; the sync's bytes come from DRAM. Both ratios are printed.
    /usr/bin/python3 -c "
pt, dr, w, s = float('$limit') / 1000, float('$dram') / 1000, float('$w'), float('$steady')
print('UCX_TLS=%-8s ucx_perftest %s %.3f GB/s (%s); wex sync %.3f GB/s (ratio %.2f), after the first step %.3f GB/s (ratio %.2f; %.2f to %s at 256 MiB, %.3f GB/s)' % ('$tls', '$name', pt, '$other', w, w / pt, s, s / pt, s / dr, '$name', dr))"
done
# Two hosts: the same sample across two network namespaces joined by a
# veth pair (root only), against ucp_am_bw across the same pair.
if [ "$(id -u)" -eq 0 ]; then
    unset UCX_TLS
    WEX_NETNS_PERFTEST=$size bash tests/multihost/test_netns.sh "$wex" samples | grep -E 'veth|FAIL' || true
fi
